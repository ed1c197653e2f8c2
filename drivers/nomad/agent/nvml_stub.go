//go:build !cgo

package agent

import (
	"errors"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
)

// NVMLReader is a stub: this berth was built without cgo and cannot load
// NVML.
type NVMLReader struct{}

// NewNVMLReader always fails in a build without cgo.
func NewNVMLReader() (*NVMLReader, error) {
	return nil, errors.New("NVML is not available: this berth was built with CGO_ENABLED=0 and cannot load libnvidia-ml.so.1; use a berth built with cgo on GPU nodes")
}

// Read never runs: NewNVMLReader never returns a reader.
func (*NVMLReader) Read() ([]gpumeta.GPU, error) { return nil, errors.New("NVML stub") }

// Close does nothing.
func (*NVMLReader) Close() error { return nil }
