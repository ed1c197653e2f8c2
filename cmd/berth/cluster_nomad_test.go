package main

import (
	"testing"
)

func TestNomadConfig(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://10.0.0.9:4646")
	t.Setenv("NOMAD_CACERT", "")
	t.Setenv("NOMAD_CLIENT_CERT", "")
	for arg, want := range map[string]string{"": "http://10.0.0.9:4646", "//nomad.lab:4646": "http://nomad.lab:4646"} {
		c, err := nomadConfig(arg)
		if err != nil || c.Address != want {
			t.Errorf("nomadConfig(%q) = %q, %v; want %q", arg, c.Address, err, want)
		}
	}
	t.Setenv("NOMAD_CACERT", "/ca.pem")
	if c, _ := nomadConfig("//nomad.lab:4646"); c.Address != "https://nomad.lab:4646" {
		t.Errorf("with TLS set: %q, want https", c.Address)
	}
	for _, bad := range []string{"nomad.lab", "//", "//h:1/x"} {
		if _, err := nomadConfig(bad); err == nil {
			t.Errorf("nomadConfig(%q) accepted", bad)
		}
	}
}

// A Nomad token over plain http:// to another host is warned about.
func TestPlainHTTPToken(t *testing.T) {
	for addr, want := range map[string]bool{
		"http://10.0.0.9:4646": true, "http://nomad.lab:4646": true,
		"https://10.0.0.9:4646": false, "http://127.0.0.1:4646": false, "http://localhost:4646": false, "http://[::1]:4646": false,
	} {
		if got := plainHTTPToken(addr, true) != ""; got != want {
			t.Errorf("plainHTTPToken(%q) warns: %v, want %v", addr, got, want)
		}
	}
	if plainHTTPToken("http://10.0.0.9:4646", false) != "" {
		t.Errorf("warned without a token")
	}
}
