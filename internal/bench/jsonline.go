package bench

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes v (a *Result or a *Summary) as one line of JSON.
func WriteJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
