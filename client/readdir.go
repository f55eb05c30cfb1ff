package client

import (
	"context"
	"iter"
)

// Entries returns an iterator over the entries of directory p in name
// order, with their attributes if attrs is set. It reads the directory a
// page at a time (the server's default page, 1,024 entries) and holds one
// page only, so a directory of millions of entries streams in memory of
// one page; entries added or removed while it runs may or may not be
// seen, as with readdir(3). Iteration stops at the first error, which it
// yields with a nil entry.
func (c *Client) Entries(ctx context.Context, p string, attrs bool) iter.Seq2[*DirEntry, error] {
	return c.entries(ctx, func(cursor string) ([]*DirEntry, string, bool, error) {
		return c.ReadDirPage(ctx, p, cursor, 0, attrs)
	})
}

// EntriesIno is Entries for directory ino.
func (c *Client) EntriesIno(ctx context.Context, ino Ino, attrs bool) iter.Seq2[*DirEntry, error] {
	return c.entries(ctx, func(cursor string) ([]*DirEntry, string, bool, error) {
		return c.ReadDirIno(ctx, ino, cursor, 0, attrs)
	})
}

func (c *Client) entries(ctx context.Context, page func(cursor string) ([]*DirEntry, string, bool, error)) iter.Seq2[*DirEntry, error] {
	return func(yield func(*DirEntry, error) bool) {
		cursor := ""
		for {
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			ents, next, eof, err := page(cursor)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, e := range ents {
				if !yield(e, nil) {
					return
				}
			}
			if eof || next == cursor {
				return
			}
			cursor = next
		}
	}
}
