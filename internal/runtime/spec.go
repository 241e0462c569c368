package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// MaxSpecSize bounds a config.json: real ones are a few KiB to a few
// hundred KiB (a long environment, many mounts).
const MaxSpecSize = 16 << 20

// Redacted replaces every value Redact hides.
const Redacted = "<redacted by accel-doctor>"

// ReadSpec reads and parses an OCI config.json through the root. A
// snapshot being recorded keeps it only as Redact returns it.
func ReadSpec(root *hostfs.Root, p string) (*specs.Spec, error) {
	b, err := root.ReadFileRedacted(p, MaxSpecSize, Redact)
	if err != nil {
		return nil, err
	}
	return ParseSpec(b, p)
}

// ParseSpec parses config.json bytes; name is used in errors.
func ParseSpec(b []byte, name string) (*specs.Spec, error) {
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// Redact is what may leave the host of a config.json: all of it but the
// values of process.args after args[0], of process.env, and of each hook's
// args (after args[0]) and env. It works on the JSON document rather than
// on specs.Spec so that fields this version of the runtime-spec types does
// not know survive too. A file that does not parse is not kept at all.
func Redact(b []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	if proc, ok := doc["process"].(map[string]any); ok {
		redactArgs(proc["args"])
		redactEnv(proc["env"])
		if cl, ok := proc["commandLine"].(string); ok && cl != "" {
			proc["commandLine"] = Redacted // Windows' single command line
		}
	}
	if hooks, ok := doc["hooks"].(map[string]any); ok {
		for _, list := range hooks {
			hs, _ := list.([]any)
			for _, h := range hs {
				if hook, ok := h.(map[string]any); ok {
					redactArgs(hook["args"])
					redactEnv(hook["env"])
				}
			}
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(doc) != nil {
		return nil
	}
	return out.Bytes()
}

// redactArgs keeps args[0] (which program: the NVIDIA hook is recognised by
// it) and hides the rest.
func redactArgs(v any) {
	args, _ := v.([]any)
	for i := 1; i < len(args); i++ {
		args[i] = Redacted
	}
}

// redactEnv keeps each variable's name (NVIDIA_VISIBLE_DEVICES is judged
// by its presence) and hides its value.
func redactEnv(v any) {
	env, _ := v.([]any)
	for i, e := range env {
		if s, ok := e.(string); ok {
			name, _, _ := strings.Cut(s, "=")
			env[i] = name + "=" + Redacted
		} else {
			env[i] = Redacted
		}
	}
}
