// Command abigen writes the Go constants and the guest C header from abi/spec.go.
// Run it through `go generate ./abi`.
package main

import (
	"flag"
	"log"
	"os"

	"vgpu/abi/internal/gen"
)

func main() {
	goOut := flag.String("go", "", "path of the generated Go file")
	cOut := flag.String("c", "", "path of the generated C header")
	flag.Parse()
	if *goOut == "" || *cOut == "" {
		log.Fatal("abigen: both -go and -c are required")
	}
	src, err := gen.Go()
	if err != nil {
		log.Fatalf("abigen: %v", err)
	}
	if err := os.WriteFile(*goOut, src, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*cOut, gen.C(), 0o644); err != nil {
		log.Fatal(err)
	}
}
