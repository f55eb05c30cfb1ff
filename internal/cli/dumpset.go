package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
)

// A dump set is the dump of a subtree that spans partitions: `canopy dump
// PATH` through a router whose mount table has entries below PATH. It is
// one part per partition, each a whole dump of its own (the form of a
// single dump: binary or JSON) taken at that partition's own log
// position, so the set is consistent per partition, not across them. The
// first part is PATH's own (the partition that holds PATH: its subtree
// under PATH, or the whole partition 0 for PATH "/"); then one per mount
// entry below PATH: the whole mounted partition where the entry mounts
// its root, otherwise the subtree under the entry's target. Binary form:
//
//	"CANOPY-DUMPSET\n"                  magic
//	uvarint version (1), parts
//	parts times: uvarint n, n bytes     the part's head, JSON (setPart)
//	             a binary dump          as `canopy dump --format binary` writes one
//
// JSON form: a line {"t":"dumpset",...}, then per part a line
// {"t":"part",...} followed by the lines of the part's JSON dump.
//
// `canopy load --dir DIR SET` restores each part into DIR/pK, K its
// partition (the layout of `canopy up --dir DIR --partitions N`), and
// gives the first part's partition a mount table that mounts every other
// part where it was, relative to PATH.

const (
	setMagic       = "CANOPY-DUMPSET\n"
	setVersion     = 1
	partLinePrefix = `{"t":"part"`
)

// setPart is one part's head in a dump set.
type setPart struct {
	T        string `json:"t"`                   // "part"
	Prefix   string `json:"prefix"`              // where it is mounted, relative to the set's PATH; "/" for the first part
	VPart    uint16 `json:"vpart"`               // the virtual partition it was mounted from (the first part: 0)
	Target   string `json:"target"`              // the directory of that partition it is of
	ReadOnly bool   `json:"read_only,omitempty"` // the mount entry was read-only

	src dumpSource
}

// jsonSetHead is the first line of a JSON dump set.
type jsonSetHead struct {
	T       string `json:"t"` // "dumpset"
	Version int    `json:"version"`
	Path    string `json:"path"`
	Parts   int    `json:"parts"`
}

// below reports whether prefix lies strictly below directory dir.
func below(prefix, dir string) bool {
	if dir == "/" {
		return prefix != "/"
	}
	return strings.HasPrefix(prefix, dir+"/")
}

// planSet returns the parts of a dump of subtree (a clean absolute path,
// "/" for the whole namespace): nil where no mount entry lies below it
// (or there are no tables), which is a dump of one partition.
func (g *globals) planSet(subtree string) ([]setPart, error) {
	var mounts []client.MountEntry
	var holder client.MountEntry // the entry PATH lies under
	err := g.runLong(func(ctx context.Context, c *client.Client) error {
		t, err := c.Tables(ctx)
		if err != nil {
			return nil // no tables: a single server
		}
		for _, m := range t.Mounts {
			if below(m.Prefix, subtree) {
				mounts = append(mounts, m)
			} else if (m.Prefix == subtree || below(subtree, m.Prefix)) && len(m.Prefix) >= len(holder.Prefix) {
				holder = m
			}
		}
		return nil
	})
	if err != nil || len(mounts) == 0 {
		return nil, err
	}
	if holder.VPart != 0 {
		// Loaded, the first part is the root of the namespace, whose
		// tables partition 0 keeps.
		return nil, fmt.Errorf("dump: %s lies in partition %d (mounted at %s) and mount entries lie below it; a dump set starts in partition 0: dump its parts apart", subtree, holder.VPart, holder.Prefix)
	}
	top := setPart{T: "part", Prefix: "/", Target: subtree, src: dumpSource{subtree: subtree}}
	if subtree == "/" {
		top.src = dumpSource{partition: 0}
	}
	parts := []setPart{top}
	seen := map[uint16]string{}
	for _, m := range mounts {
		if other, ok := seen[m.VPart]; ok {
			return nil, fmt.Errorf("dump: partition %d is mounted twice under %s (%s and %s); dump those apart", m.VPart, subtree, other, m.Prefix)
		}
		seen[m.VPart] = m.Prefix
		p := setPart{T: "part", Prefix: "/" + strings.TrimPrefix(strings.TrimPrefix(m.Prefix, subtree), "/"),
			VPart: m.VPart, Target: m.Target, ReadOnly: m.ReadOnly, src: dumpSource{subtree: m.Prefix}}
		if path.Clean(m.Target) == "/" {
			p.src = dumpSource{partition: m.VPart}
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// dumpSet writes the dump set of parts in format to out and returns what
// each part was.
func (g *globals) dumpSet(cmd *cobra.Command, subtree, format string, parts []setPart, out io.Writer) ([]client.DumpInfo, error) {
	var infos []client.DumpInfo
	if format == "json" {
		head, _ := json.Marshal(jsonSetHead{"dumpset", setVersion, subtree, len(parts)})
		if _, err := out.Write(append(head, '\n')); err != nil {
			return nil, fmt.Errorf("dump: %w", err)
		}
	} else {
		b := binary.AppendUvarint([]byte(setMagic), setVersion)
		b = binary.AppendUvarint(b, uint64(len(parts)))
		if _, err := out.Write(b); err != nil {
			return nil, fmt.Errorf("dump: %w", err)
		}
	}
	for _, p := range parts {
		head, _ := json.Marshal(p)
		var err error
		if format == "json" {
			_, err = out.Write(append(head, '\n'))
		} else {
			_, err = out.Write(append(binary.AppendUvarint(nil, uint64(len(head))), head...))
		}
		if err != nil {
			return infos, fmt.Errorf("dump: %w", err)
		}
		var info client.DumpInfo
		if format == "json" {
			info, err = g.dumpJSON(cmd, p.src, out)
		} else {
			info, err = g.dumpBinary(cmd, p.src, out)
		}
		if err != nil {
			return infos, fmt.Errorf("dump %s: %w", path.Join(subtree, p.Prefix), err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// loadedPart is what loading one part of a set restored.
type loadedPart struct {
	setPart
	head dumpHeader
	dir  string
}

// partitionDir is where `canopy up --dir DIR --partitions N` keeps
// partition k's metadata.
func partitionDir(dir string, k uint16) string { return filepath.Join(dir, fmt.Sprintf("p%d", k)) }

// loadSet restores the dump set read from r (its form told apart by its
// first byte) into the partition directories under dir, then sets the
// first part's mount table.
// With force, each part's directory is emptied first (and nothing else
// under dir: it may hold the object store).
func loadSet(cmd *cobra.Command, r *bufio.Reader, dir string, jsonForm, force bool, log *slog.Logger) ([]loadedPart, error) {
	n, err := readSetHead(r, jsonForm)
	if err != nil {
		return nil, err
	}
	var forceErr error
	emptied := map[string]bool{}
	into := func(h dumpHeader) string {
		d := partitionDir(dir, h.Partition)
		if force && !emptied[d] {
			emptied[d] = true
			forceErr = errors.Join(forceErr, os.RemoveAll(d))
		}
		return d
	}
	var done []loadedPart
	for i := range n {
		p, err := readPartHead(r, jsonForm)
		if err != nil {
			return done, fmt.Errorf("part %d: %w", i, err)
		}
		var h dumpHeader
		if jsonForm {
			var line []byte
			if line, err = r.ReadBytes('\n'); err != nil {
				err = fmt.Errorf("%w: a part's first line: %w", ErrBadDump, err)
			} else {
				h, err = loadJSONLines(cmd, line, &partReader{r: r, lineStart: true}, into, log)
			}
		} else {
			h, err = loadBinaryInto(cmd, r, into, log)
		}
		if err == nil {
			err = forceErr
		}
		if err != nil {
			return done, fmt.Errorf("part %d (%s): %w", i, p.Prefix, err)
		}
		done = append(done, loadedPart{setPart: p, head: h, dir: into(h)})
	}
	if extra, _ := r.Peek(1); len(extra) > 0 {
		return done, fmt.Errorf("%w: bytes after the last part", ErrBadDump)
	}
	if err := mountParts(done, log); err != nil {
		return done, fmt.Errorf("mount table: %w", err)
	}
	return done, nil
}

// readSetHead reads a set's magic or first line and returns its number
// of parts.
func readSetHead(r *bufio.Reader, jsonForm bool) (int, error) {
	if jsonForm {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0, fmt.Errorf("%w: first line: %w", ErrBadDump, err)
		}
		var head jsonSetHead
		if err := json.Unmarshal(line, &head); err != nil || head.T != "dumpset" || head.Parts < 1 {
			return 0, fmt.Errorf("%w: first line is not a dump set's head (%v)", ErrBadDump, err)
		}
		if head.Version != setVersion {
			return 0, fmt.Errorf("%w: dump set version %d", ErrBadDump, head.Version)
		}
		return head.Parts, nil
	}
	magic := make([]byte, len(setMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != setMagic {
		return 0, fmt.Errorf("%w: no dump set magic", ErrBadDump)
	}
	v, err := binary.ReadUvarint(r)
	if err != nil || v != setVersion {
		return 0, fmt.Errorf("%w: dump set version %d (%v)", ErrBadDump, v, err)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n < 1 || n > 1<<16 {
		return 0, fmt.Errorf("%w: dump set of %d parts (%v)", ErrBadDump, n, err)
	}
	return int(n), nil
}

// readPartHead reads a part's head and checks what it says.
func readPartHead(r *bufio.Reader, jsonForm bool) (setPart, error) {
	var b []byte
	var err error
	if jsonForm {
		b, err = r.ReadBytes('\n')
	} else {
		var n uint64
		if n, err = binary.ReadUvarint(r); err == nil {
			if n > 1<<16 {
				return setPart{}, fmt.Errorf("%w: a part's head of %d bytes", ErrBadDump, n)
			}
			b = make([]byte, n)
			_, err = io.ReadFull(r, b)
		}
	}
	if err != nil {
		return setPart{}, fmt.Errorf("%w: a part's head: %w", ErrBadDump, err)
	}
	var p setPart
	if err := json.Unmarshal(b, &p); err != nil || p.T != "part" {
		return setPart{}, fmt.Errorf("%w: not a part's head (%v)", ErrBadDump, err)
	}
	if !path.IsAbs(p.Prefix) || path.Clean(p.Prefix) != p.Prefix {
		return setPart{}, fmt.Errorf("%w: a part mounted at %q", ErrBadDump, p.Prefix)
	}
	return p, nil
}

// partReader reads the lines of one part of a JSON dump set from r: up
// to, not including, the next part's head line.
type partReader struct {
	r         *bufio.Reader
	lineStart bool
	end       bool
}

func (p *partReader) Read(b []byte) (int, error) {
	if p.end || len(b) == 0 {
		if p.end {
			return 0, io.EOF
		}
		return 0, nil
	}
	if p.lineStart {
		head, _ := p.r.Peek(len(partLinePrefix))
		if string(head) == partLinePrefix {
			p.end = true
			return 0, io.EOF
		}
	}
	if p.r.Buffered() == 0 {
		if _, err := p.r.Peek(1); err != nil {
			return 0, err
		}
	}
	buf, _ := p.r.Peek(min(len(b), p.r.Buffered()))
	n := len(buf)
	p.lineStart = false
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		n, p.lineStart = i+1, true
	}
	copy(b, buf[:n])
	p.r.Discard(n)
	return n, nil
}

// mountParts gives the first part's partition a mount table that mounts
// every other part where it was: the part's partition at its prefix,
// its root as the target (a part of a subtree has that subtree as its
// root). The directory is opened as a server on loopback for the one
// update and closed again.
func mountParts(parts []loadedPart, log *slog.Logger) error {
	if len(parts) < 2 {
		return nil
	}
	top := parts[0]
	srv, err := server.Open(server.Config{Dir: top.dir, Partition: top.head.Partition, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return fmt.Errorf("listen: %w", err)
	}
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("load: shut the restored partition down", "err", err)
		}
	}()
	c, err := client.Dial(ln.Addr().String(), client.Options{Cred: &client.Cred{}})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, err := c.Tables(ctx)
	if err != nil {
		return err
	}
	u := client.TablesUpdate{ExpectedVersion: t.Version}
	for _, m := range t.Mounts {
		if m.Prefix != "/" { // the root's own entry stays
			u.RemoveMounts = append(u.RemoveMounts, m.Prefix)
		}
	}
	for _, p := range parts[1:] {
		u.SetMounts = append(u.SetMounts, client.MountEntry{Prefix: p.Prefix, VPart: p.head.Partition, Target: "/", ReadOnly: p.ReadOnly})
	}
	_, err = c.UpdateTables(ctx, u)
	return err
}
