// Command berth is a GitOps reconciler for GPU clusters on Nomad.
package main

import (
	"os"

	// Mozilla's CA roots, used only where the system has none: the
	// container image (internal/dist) is an empty base with berth, and
	// berth still reaches Nomad and git over TLS.
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() { os.Exit(Main()) }
