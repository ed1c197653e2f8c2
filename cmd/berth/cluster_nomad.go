package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/berth-dev/berth/api"
	"github.com/berth-dev/berth/drivers/nomad"
)

// nomadScheme: --cluster nomad reads NOMAD_ADDR, NOMAD_TOKEN,
// NOMAD_REGION and the TLS variables as the nomad CLI does;
// --cluster nomad://HOST:PORT overrides the address. The token is never
// printed.
var nomadScheme = clusterScheme{
	Name:  "nomad",
	Usage: "nomad | nomad://HOST:PORT  a Nomad cluster (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_REGION, NOMAD_CACERT, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY; the URL overrides NOMAD_ADDR)",
	Open: func(ctx context.Context, opts clusterOptions) (*openedCluster, error) {
		cfg, err := nomadConfig(opts.Arg)
		if err != nil {
			return nil, err
		}
		cfg.RequestTimeout = opts.RequestTimeout
		cfg.Use, cfg.Logger = opts.GPUUse, opts.Logger
		if w := plainHTTPToken(cfg.Address, cfg.Token != ""); w != "" && opts.Logger != nil {
			opts.Logger.Warn(w)
		}
		d, err := nomad.New(cfg)
		if err != nil {
			return nil, err
		}
		return &openedCluster{Name: "nomad " + cfg.Address, Cluster: d, Store: d, Lease: d, Watch: d.Watch, Sample: d.StartSampling, Close: d.Close,
			Unreachable: "check that Nomad is running at " + cfg.Address + " and that NOMAD_ADDR (or --cluster nomad://HOST:PORT) names it"}, nil
	},
}

// nomadConfig reads the environment; arg is what follows "nomad:" in
// --cluster ("" or "//HOST:PORT").
func nomadConfig(arg string) (nomad.Config, error) {
	var addr string
	if arg != "" {
		hostport, ok := strings.CutPrefix(arg, "//")
		if !ok || hostport == "" || strings.Contains(hostport, "/") {
			return nomad.Config{}, usagef("--cluster nomad:%s: want nomad or nomad://HOST:PORT", arg)
		}
		env := nomad.ConfigFromEnv("")
		scheme := "http"
		if strings.HasPrefix(env.Address, "https://") || env.CACert != "" || env.ClientCert != "" {
			scheme = "https"
		}
		addr = fmt.Sprintf("%s://%s", scheme, hostport)
	}
	return nomad.ConfigFromEnv(addr), nil
}

// plainHTTPToken returns a warning when a Nomad token goes over plain
// http:// to a host other than loopback, where anyone on the network path
// reads it; "" otherwise.
func plainHTTPToken(address string, withToken bool) string {
	u, err := url.Parse(address)
	if !withToken || err != nil || u.Scheme != "http" || api.IsLoopback(u.Host) {
		return ""
	}
	return "NOMAD_TOKEN is sent unencrypted over plain http:// to " + u.Host + ": anyone on the network path can read it; use https:// (NOMAD_ADDR and NOMAD_CACERT)"
}
