// Command errorcodes prints the API's error codes (wire.ErrorCodes) as a
// JSON array of {"code","status","meaning","retry"}: the list that
// clients in other languages check their own tables against (the Python
// client's tests run it: api/python/tests/test_errors.py).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/lockd/lockd/api/wire"
)

func main() {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(wire.ErrorCodes()); err != nil {
		fmt.Fprintln(os.Stderr, "errorcodes:", err)
		os.Exit(1)
	}
}
