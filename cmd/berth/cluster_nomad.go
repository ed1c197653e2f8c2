package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/drivers/nomad"
)

// The nomad scheme: --cluster nomad reads NOMAD_ADDR, NOMAD_TOKEN,
// NOMAD_REGION and the TLS variables as the nomad CLI does;
// --cluster nomad://HOST:PORT overrides the address. The token is never
// printed.
func init() {
	registerCluster(clusterScheme{
		Name:  "nomad",
		Usage: "nomad | nomad://HOST:PORT  a Nomad cluster (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_REGION, NOMAD_CACERT, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY; the URL overrides NOMAD_ADDR)",
		Open: func(ctx context.Context, opts clusterOptions) (*openedCluster, error) {
			cfg, err := nomadConfig(opts.Arg)
			if err != nil {
				return nil, err
			}
			d, err := nomad.New(cfg)
			if err != nil {
				return nil, err
			}
			return &openedCluster{Name: "nomad " + cfg.Address, Cluster: d, Store: d, Lease: d, Watch: d.Watch, Close: d.Close,
				Unreachable: "check that Nomad is running at " + cfg.Address + " and that NOMAD_ADDR (or --cluster nomad://HOST:PORT) names it"}, nil
		},
	})
}

// nomadConfig reads the environment; arg is what follows "nomad:" in
// --cluster ("" or "//HOST:PORT").
func nomadConfig(arg string) (nomad.Config, error) {
	var addr string
	if arg != "" {
		hostport, ok := strings.CutPrefix(arg, "//")
		if !ok || hostport == "" || strings.Contains(hostport, "/") {
			return nomad.Config{}, usageError("--cluster nomad:%s: want nomad or nomad://HOST:PORT", arg)
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
