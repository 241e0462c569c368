// Package runtime reads what container runtimes leave on a host: a
// container's OCI runtime config (config.json, read with the runtime-spec
// types). It reads through hostfs and writes nothing.
//
// What a snapshot keeps of a config is redacted (Redact): the values of the
// process's arguments and environment and of every hook's arguments and
// environment are where tokens and passwords live, so they never leave the
// host; their keys and positions stay, so that a replay decides the same.
package runtime
