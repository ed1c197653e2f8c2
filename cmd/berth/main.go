// Command berth is a GitOps reconciler for GPU clusters on Nomad.
package main

import "os"

func main() { os.Exit(Main()) }
