package server

import "fmt"

// Verify recovers the partition stored in cfg.Dir without serving it, and
// checks the namespace's invariants (see engine.Check). It returns the
// number of nodes. It must not run while a server has the directory open.
func Verify(cfg Config) (int, error) {
	cfg.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, cache: newRetryCache(cfg.RetryCacheSize)}
	if err := s.recover(); err != nil {
		return 0, err
	}
	defer s.wal.Close()
	if err := s.eng.Check(); err != nil {
		return s.eng.Len(), fmt.Errorf("verify %s: %w", cfg.Dir, err)
	}
	return s.eng.Len(), nil
}
