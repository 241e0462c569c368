package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

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
// not know survive too, and it keeps the document as ParseSpec reads it:
// keys are matched as encoding/json matches them to the spec's fields,
// case-insensitively ("PROCESS" is the process, and its env is hidden
// too), and numbers are kept as written (a float64 would turn an
// RLIMIT_MEMLOCK of 18446744073709551615, Docker's --ulimit memlock=-1,
// into a number no uint64 holds). A file that does not parse is not kept
// at all, nor is one whose object holds a key in two spellings that read
// into the same field ("env" and "Env"), or an object twice: what
// ParseSpec reads of them is not what a map of the document can keep.
func Redact(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF || duplicateKey(b) {
		return nil // trailing data (json.Unmarshal refuses it), or a key twice
	}
	fields(doc, "process", func(_ string, v any) {
		proc, _ := v.(map[string]any)
		fields(proc, "args", func(_ string, v any) { redactArgs(v) })
		fields(proc, "env", func(_ string, v any) { redactEnv(v) })
		fields(proc, "commandLine", func(k string, v any) {
			if cl, ok := v.(string); ok && cl != "" {
				proc[k] = Redacted // Windows' single command line
			}
		})
	})
	fields(doc, "hooks", func(_ string, v any) {
		hooks, _ := v.(map[string]any)
		for _, list := range hooks {
			hs, _ := list.([]any)
			for _, h := range hs {
				hook, _ := h.(map[string]any)
				fields(hook, "args", func(_ string, v any) { redactArgs(v) })
				fields(hook, "env", func(_ string, v any) { redactEnv(v) })
			}
		}
	})
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(doc) != nil {
		return nil
	}
	return out.Bytes()
}

// fields calls fn with each key of m that encoding/json reads into the
// struct field named name (exactly or case-insensitively), and its value.
func fields(m map[string]any, name string, fn func(key string, v any)) {
	for k, v := range m {
		if strings.EqualFold(k, name) {
			fn(k, v)
		}
	}
}

// duplicateKey reports whether an object of the JSON document b holds a
// key twice in two spellings that encoding/json reads into the same field
// (compared as it compares them with a field's name, bytes.EqualFold): a
// map keeps both and re-encodes them in another order; or twice alike
// with an object for its value, which the spec's struct merges and a map
// replaces. A key written twice alike with any other value is not one:
// the map and the struct both keep its last value. b is a document that
// decodes.
func duplicateKey(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// One entry per open object or array: the keys of an object (nil for
	// an array) and whether the object's next token is a key.
	type level struct {
		keys    map[string]string // folded key -> its spelling
		wantKey bool
		again   bool // the key just read was read before, alike
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.keys != nil {
			if top.wantKey {
				raw := tok.(string)
				k := foldKey(raw)
				seen, ok := top.keys[k]
				if ok && seen != raw {
					return true
				}
				top.keys[k], top.wantKey, top.again = raw, false, ok
				continue
			}
			if top.again && tok == json.Delim('{') {
				return true // the struct merges both objects; the map keeps the last
			}
			top.wantKey, top.again = true, false // this value, then the next key
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]string{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		}
	}
}

// foldKey is encoding/json's folding of a key (its foldName): ASCII
// letters in upper case, any other rune the smallest of its fold set.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		for {
			f := unicode.SimpleFold(r)
			if f <= r {
				return f
			}
			r = f
		}
	}, s)
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
