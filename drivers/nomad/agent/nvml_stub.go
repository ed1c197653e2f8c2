//go:build !cgo

package agent

import (
	"errors"

	"github.com/berth-dev/berth/drivers/nomad/gpumeta"
)

// NVMLReader is a stub: this berth was built without cgo and cannot load
// NVML.
type NVMLReader struct{}

// NewNVMLReader always fails in a build without cgo, with ErrNoCgo.
func NewNVMLReader() (*NVMLReader, error) { return nil, ErrNoCgo }

// Read never runs: NewNVMLReader never returns a reader.
func (*NVMLReader) Read() ([]gpumeta.GPU, error) { return nil, errors.New("NVML stub") }

// Close does nothing.
func (*NVMLReader) Close() error { return nil }
