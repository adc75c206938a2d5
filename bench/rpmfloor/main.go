// Command rpmfloor is bench/rpm.sh's Go floor: it decompresses an RPM's
// payload and compresses it again with the libraries, codec, level and
// pipe cfi2sframe uses (rpm.Recompress), writing it to standard output.
//
//	rpmfloor IN.rpm > /dev/null
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/cfi2sframe/cfi2sframe/internal/rpm"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rpmfloor IN.rpm > OUT")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "rpmfloor:", err)
		os.Exit(1)
	}
}

func run(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	if err := rpm.Recompress(context.Background(), f, fi.Size(), w, rpm.Options{Name: name}); err != nil {
		return err
	}
	return w.Flush()
}
