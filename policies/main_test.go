package policies

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the property tests over 1,000 generated cases each unless
// -rapid.checks says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	checksSet := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			checksSet = true
		}
	})
	if !checksSet {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
