// Command lockctl runs jobs under lockd locks and inspects a lockd cluster.
// See doc.go for the commands and exit codes.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
