package nomadfake

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestVariableLimits checks the fake refuses what Nomad 1.6.5 refused
// when measured (HTTP 500, these messages), and in the same order: the
// size before the CAS index.
func TestVariableLimits(t *testing.T) {
	url := New().Start(t).URL
	put := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", url+"/v1/var/"+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	items := func(k string, n int) string { return `{"Items":{"` + k + `":"` + strings.Repeat("x", n) + `"}}` }
	for name, c := range map[string]struct {
		path, body string
		status     int
		msg        string
	}{
		"64 KiB with the key":   {"a", items("k", 65535), 200, ""},
		"one byte more":         {"a", items("k", 65536), 500, "variables are limited to 64KiB in total size"},
		"two items count":       {"b", `{"Items":{"a":"` + strings.Repeat("x", 32768) + `","b":"` + strings.Repeat("y", 32767) + `"}}`, 500, "variables are limited to 64KiB in total size"},
		"size before cas":       {"a?cas=999", items("k", 70000), 500, "variables are limited to 64KiB in total size"},
		"stale cas":             {"a?cas=999", items("k", 1), 409, ""},
		"dot in path":           {"a.b", items("k", 1), 500, `invalid path "a.b"`},
		"129 characters":        {strings.Repeat("p", 129), items("k", 1), 500, `invalid path "` + strings.Repeat("p", 129) + `"`},
		"128 characters":        {strings.Repeat("p", 128), items("k", 1), 200, ""},
		"reserved nomad/ paths": {"nomad/x", items("k", 1), 500, `only paths at "nomad/jobs" or "nomad/job-templates" and below are valid paths under the top-level "nomad" directory`},
		"nomad/jobs is allowed": {"nomad/jobs/x", items("k", 1), 200, ""},
	} {
		status, body := put(c.path, c.body)
		if status != c.status || (c.msg != "" && body != c.msg) {
			t.Errorf("%s: %d %q, want %d %q", name, status, body, c.status, c.msg)
		}
	}
}
