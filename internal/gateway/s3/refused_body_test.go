package s3_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request refused before its body is read must not leave that body on
// the connection to be read as the next request: the gateway closes the
// connection after answering it. Here an unsigned PUT with a body that
// looks like a request line is sent, and a second request right after it
// on the same connection.
func TestRefusedRequestWithBodyClosesConnection(t *testing.T) {
	e := start(t)
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.url, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := "GET /leftover HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 200<<10)
	fmt.Fprintf(conn, "PUT /bucket/object HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	fmt.Fprintf(conn, "HEAD /bucket/object HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")

	r := bufio.NewReader(conn)
	first, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the PUT's answer: %v", err)
	}
	io.Copy(io.Discard, first.Body)
	first.Body.Close()
	if first.StatusCode < 400 {
		t.Fatalf("an unsigned PUT answered %s, want a refusal", first.Status)
	}
	next, err := http.ReadResponse(r, &http.Request{Method: http.MethodHead})
	if err == nil {
		t.Fatalf("after the refused PUT the connection answered again (%s): its body was read as a request", next.Status)
	}
	if !first.Close {
		t.Errorf("the refusal does not say Connection: close")
	}
}
