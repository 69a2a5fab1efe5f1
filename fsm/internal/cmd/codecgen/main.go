// Command codecgen writes package fsm's msgpack codecs (codec_gen.go) from
// the msgpack tags of lockstate's commands and records: go generate runs
// it in fsm's directory (see fsm/internal/codecgen).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lockd/lockd/fsm/internal/codecgen"
)

func main() {
	out := flag.String("o", "codec_gen.go", "the file to write, in the current directory")
	flag.Parse()
	src, err := codecgen.Generate(".", *out)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
