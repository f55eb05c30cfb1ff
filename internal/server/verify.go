package server

import "fmt"

// Verify recovers the partition stored in cfg.Dir without serving it, and
// checks the namespace's invariants (see engine.Check). It returns the
// number of nodes. It must not run while a server has the directory open.
func Verify(cfg Config) (int, error) {
	r, err := recoverOffline(cfg)
	if err != nil {
		return 0, err
	}
	defer r.wal.Close()
	if err := r.eng.Check(); err != nil {
		return r.eng.Len(), fmt.Errorf("verify %s: %w", cfg.Dir, err)
	}
	return r.eng.Len(), nil
}
