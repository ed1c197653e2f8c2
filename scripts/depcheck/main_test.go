package main

import (
	"strings"
	"testing"
)

// A vulnerability berth's code calls in a module fails the check; one in
// the standard library is reported with its fix; one that is only
// imported is not reported.
func TestReport(t *testing.T) {
	stream := `{"config":{"go_version":"go1.26.8"}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v0.60.0","trace":[{"module":"golang.org/x/net","version":"v0.59.0","package":"golang.org/x/net/html","function":"Parse"}]}}
{"finding":{"osv":"GO-2026-0002","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"}]}}
{"finding":{"osv":"GO-2026-0004","fixed_version":"v1.26.10","trace":[{"module":"stdlib","version":"v1.26.8","package":"crypto/x509","function":"Verify"}]}}
{"finding":{"osv":"GO-2026-0003","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p"}]}}
`
	found, goVersion, err := parse(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if code := report(&out, found, goVersion); code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, &out)
	}
	for _, want := range []string{
		"dependency check FAILED: berth's code reaches 1 known vulnerabilities in its modules",
		"GO-2026-0001  golang.org/x/net@v0.59.0 (golang.org/x/net/html), fixed in v0.60.0: go get golang.org/x/net@v0.60.0",
		"the Go toolchain (go1.26.8) has 2 known vulnerabilities that berth's code reaches, fixed in go1.26.10 (build releases with it): GO-2026-0002 (net/http) GO-2026-0004 (crypto/x509)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, &out)
		}
	}
	if strings.Contains(out.String(), "GO-2026-0003") {
		t.Errorf("an advisory berth does not call is reported:\n%s", &out)
	}

	delete(found, "GO-2026-0001")
	out.Reset()
	if code := report(&out, found, goVersion); code != 0 {
		t.Errorf("only the toolchain's: exit %d, want 0:\n%s", code, &out)
	}
}
