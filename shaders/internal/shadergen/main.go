// Command shadergen writes guest/include/vgpu_shaders.h from package shaders (go generate).
package main

import (
	"flag"
	"log"
	"os"

	"vgpu/shaders"
)

func main() {
	out := flag.String("o", "", "output file")
	flag.Parse()
	h, err := shaders.Header()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, h, 0o644); err != nil {
		log.Fatal(err)
	}
}
