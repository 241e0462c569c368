package report

import "io"

// WriteJSON writes the report as one JSON document (docs/report-schema.md).
func WriteJSON(w io.Writer, r *Report) error { return WriteJSONValue(w, r) }
