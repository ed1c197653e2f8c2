package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/berth-dev/berth/drivers"
)

// MemLease is a LeaseStore in memory, for the tests of what takes part
// in an election: check-and-set on a version, and
// write answers that can be lost after the write was made.
type MemLease struct {
	mu     sync.Mutex
	lease  drivers.Lease
	ver    uint64
	writes int
	reads  int
	// LoseAnswer makes the next write commit, then fail as if the
	// answer was lost.
	LoseAnswer bool
}

func (m *MemLease) ReadLease(ctx context.Context) (drivers.Lease, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return m.lease, m.ver, nil
}

func (m *MemLease) WriteLease(ctx context.Context, l drivers.Lease, ver uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ver != m.ver {
		return 0, &drivers.Error{Class: drivers.ClassConflict, Op: "write the lease", Err: fmt.Errorf("version %d is not the current %d", ver, m.ver)}
	}
	m.ver++
	m.lease = l
	m.writes++
	if m.LoseAnswer {
		m.LoseAnswer = false
		return 0, errors.New("connection reset")
	}
	return m.ver, nil
}
