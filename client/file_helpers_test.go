package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// backend is one kind of object store the data tests run against.
type backend struct {
	name  string
	start func(t testing.TB) (storageURL string, store object.Store)
}

var backends = []backend{
	{"local", func(t testing.TB) (string, object.Store) {
		dir := t.TempDir()
		s, err := object.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		return "file://" + dir, s
	}},
	{"s3", func(t testing.TB) (string, object.Store) {
		srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
		t.Cleanup(srv.Close)
		s, err := object.NewS3(context.Background(), object.S3Config{
			Endpoint: srv.URL, Bucket: "canopy", AccessKey: "k", SecretKey: "s", PathStyle: true, CreateBucket: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		return "s3://canopy?endpoint=" + srv.URL, s
	}},
}

// dataEnv is a metadata server with an object store and a client of both.
type dataEnv struct {
	addr  string
	url   string
	store object.Store
	c     *client.Client
	ctx   context.Context
}

// startData serves a metadata server whose VOLUME names b's store, and
// dials it. The S3 client needs the store handed over (its URL has no
// credentials); the local one opens the URL the server names.
func startData(t testing.TB, b backend, opts client.Options) *dataEnv {
	t.Helper()
	url, store := b.start(t)
	// The metadata log lives in memory: these tests are about file data,
	// and the server's own crash safety is tested elsewhere.
	_, addr := servertest.Start(t, server.Config{Storage: url, FS: vfs.NewMem()})
	if b.name != "local" {
		opts = clientdata.WithStore(opts, store)
	}
	c, err := client.Dial(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return &dataEnv{addr: addr, url: url, store: store, c: c, ctx: ctx}
}

// objects lists the keys of the store's data objects.
func (e *dataEnv) objects(t *testing.T) []string {
	t.Helper()
	infos, err := e.store.List(e.ctx, "chunks/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(infos))
	for i, info := range infos {
		keys[i] = info.Key
	}
	return keys
}
