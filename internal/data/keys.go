package data

import (
	"strconv"
	"strings"
)

// chunksPrefix starts every object key of file data.
const chunksPrefix = "chunks/"

// parseKey reads slice id, block index and block size back from a key
// made by layout.BlockKey; ok is false for any other key.
func parseKey(key string) (id uint64, index, size int, ok bool) {
	rest, found := strings.CutPrefix(key, chunksPrefix)
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	f := strings.Split(parts[2], "_")
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	id, err1 := strconv.ParseUint(f[0], 10, 64)
	ix, err2 := strconv.ParseUint(f[1], 10, 31)
	sz, err3 := strconv.ParseUint(f[2], 10, 31)
	if err1 != nil || err2 != nil || err3 != nil || blockKey(id, int(ix), int(sz)) != key {
		return 0, 0, 0, false
	}
	return id, int(ix), int(sz), true
}
