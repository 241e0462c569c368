package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The bounds on input. MaxDocumentBytes is the API server's default
// request body limit (kube-apiserver --max-request-body-bytes, 3 MiB): a
// larger object could not be created, and parsing it would only cost
// memory. MaxInputBytes bounds one file or stdin.
const (
	MaxDocumentBytes = 3 << 20
	MaxInputBytes    = 64 << 20
	// maxListDepth bounds Lists inside Lists (kubectl accepts nesting;
	// nobody writes more than one level).
	maxListDepth = 4
)

// ErrInputTooLarge is returned by ReadInput for an input over MaxInputBytes.
var ErrInputTooLarge = errors.New("input larger than 64 MiB")

// Input is one source of manifests: a file's bytes, or stdin's.
type Input struct {
	Name string // the file name as given, or "-" for stdin
	Data []byte
}

// ReadInput reads r whole, up to MaxInputBytes.
func ReadInput(name string, r io.Reader) (Input, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return Input{}, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > MaxInputBytes {
		return Input{}, fmt.Errorf("read %s: %w", name, ErrInputTooLarge)
	}
	return Input{Name: name, Data: b}, nil
}

// document is one YAML document or JSON value of an input.
type document struct {
	Index int    // from 1, in its input
	Line  int    // the line it starts on, from 1
	Data  []byte // its bytes (YAML or JSON)
	JSON  bool   // Data is already JSON
	Err   error  // the input could not be split here (JSON syntax)
}

// splitDocuments cuts an input into documents. An input whose first
// non-blank byte is '{' or '[' is a JSON stream (what kubectl accepts:
// concatenated values); anything else is YAML, cut at "---" lines and
// ended by "..." lines (YAML 1.2, 9.1: document markers start in column
// 0). Documents of blank and comment lines only are dropped, as kubectl
// drops them, and not counted.
func splitDocuments(data []byte) []document {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data)
	}
	return splitYAML(data)
}

func splitYAML(data []byte) []document {
	var docs []document
	var cur []byte
	start, line := 1, 0
	inDoc := false // something since the last marker (even blank lines)
	flush := func() {
		if inDoc && !blank(cur) {
			docs = append(docs, document{Index: len(docs) + 1, Line: start, Data: cur})
		}
		cur, inDoc = nil, false
	}
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		body := bytes.TrimRight(l, "\r\n")
		switch {
		case isMarker(body, "---"):
			flush()
			start, inDoc = line, true
			// Content may follow the marker on its line ("--- # c",
			// "--- {a: 1}"): it belongs to the new document, and keeping
			// it on its own line keeps the parser's line numbers true.
			cur = append(cur, body[3:]...)
			cur = append(cur, '\n')
			continue
		case isMarker(body, "..."):
			flush()
			start = line + 1
			continue
		}
		if !inDoc {
			start, inDoc = line, true
		}
		cur = append(cur, l...)
	}
	flush()
	return docs
}

// blank: only blank and comment lines, a document kubectl skips (and one
// a user does not count when numbering them).
func blank(b []byte) bool {
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// isMarker: l is the marker alone, or followed by a space or a tab.
func isMarker(l []byte, m string) bool {
	if !bytes.HasPrefix(l, []byte(m)) {
		return false
	}
	return len(l) == 3 || l[3] == ' ' || l[3] == '\t'
}

func splitJSON(data []byte) []document {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	// Lines are counted on from the previous value, not from the start:
	// a stream of many small values stays linear.
	counted, line := 0, 1
	lineAt := func(off int) int {
		off = min(off, len(data))
		if off > counted {
			line += bytes.Count(data[counted:off], []byte{'\n'})
			counted = off
		}
		return line
	}
	for {
		// The value starts after the whitespace before it.
		off := int(dec.InputOffset())
		for off < len(data) && isSpace(data[off]) {
			off++
		}
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs
		}
		d := document{Index: len(docs) + 1, Line: lineAt(off), JSON: true}
		if err != nil {
			// A syntax error leaves the decoder lost: the rest of the
			// stream is not read, and the finding says so.
			var se *json.SyntaxError
			if errors.As(err, &se) {
				d.Line = lineAt(int(se.Offset))
			}
			d.Err = fmt.Errorf("%w (the rest of the input was not read)", err)
			return append(docs, d)
		}
		d.Data = raw
		docs = append(docs, d)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// yamlLine finds the parser's "line N" in an error.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// errorLine is the input line an error of a document's parser points at
// (the document's first line when it names none), and the error with the
// parser's line, counted in the document, replaced by the input's.
func errorLine(d document, err error) (int, error) {
	m := yamlLine.FindStringSubmatchIndex(err.Error())
	if m == nil || d.JSON {
		return d.Line, err
	}
	msg := err.Error()
	n, convErr := strconv.Atoi(msg[m[2]:m[3]])
	if convErr != nil || n < 1 {
		return d.Line, err
	}
	line := d.Line + n - 1
	rest := strings.TrimPrefix(msg[m[1]:], ":")
	return line, errors.New(strings.TrimSpace(msg[:m[0]] + strings.TrimSpace(rest)))
}

// toJSON converts a document to JSON. ok is false for an empty document
// (only blanks and comments: YAML's null), which kubectl skips.
func toJSON(d document) (j []byte, ok bool, err error) {
	if d.JSON {
		j = d.Data
	} else {
		// go.yaml.in/yaml/v2, under sigs.k8s.io/yaml, refuses documents
		// whose aliases expand out of proportion to their size
		// ("excessive aliasing": billion-laughs bombs) and nesting deeper
		// than 10000, so a small document cannot blow up here.
		j, err = yaml.YAMLToJSON(d.Data)
		if err != nil {
			return nil, false, cleanYAMLError(err)
		}
	}
	t := bytes.TrimSpace(j)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, false, nil
	}
	return j, true, nil
}

// cleanYAMLError drops the wrapper's prefix: the finding says it was YAML.
func cleanYAMLError(err error) error {
	s := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	return errors.New(strings.TrimPrefix(s, "yaml: "))
}
