package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairrelay/fairrelay/receiverstore"
	"github.com/fairrelay/fairrelay/webhook"
)

// serveReceive runs 'relayctl receive' in process until the returned stop
// is called; it returns the URL the command printed first.
func serveReceive(t *testing.T, dir string, args ...string) (url string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	e := newEnv(strings.NewReader(""), pw, &stderr)
	e.ctx = ctx
	e.dir = dir
	done := make(chan int, 1)
	go func() {
		code := e.main(append([]string{"receive"}, args...))
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no URL printed: %v; stderr:\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	var once bool
	var code int
	stop = func() (int, string) {
		if !once {
			once = true
			cancel()
			code = <-done
		}
		return code, stderr.String()
	}
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(line), stop
}

func post(t *testing.T, url string, secret []byte, id, flow string, seq int64, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	webhook.SetHeaders(req.Header, secret, id, flow, seq, time.Now(), []byte(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// relayctl receive prints its URL first, receives signed deliveries into
// receiver.db (created), serves /metrics on the same listener, and exits 0
// when its context ends.
func TestReceive_ServesUntilInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url, stop := serveReceive(t, dir, "--listen", "127.0.0.1:0", "--secret", "whsec_c2VjcmV0", "--json")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/") || strings.HasSuffix(url, ":0/") {
		t.Fatalf("first line = %q, want http://127.0.0.1:PORT/", url)
	}
	key := []byte("secret") // whsec_c2VjcmV0 decoded
	for _, c := range []struct {
		id   string
		seq  int64
		body string
		key  []byte
		want string
	}{
		{"e1", 1, `{"delta": 4}`, key, `200 {"outcome":"accepted"}`},
		{"e1", 1, `{"delta": 4}`, key, `200 {"outcome":"duplicate"}`},
		{"e3", 3, `{"delta": 4}`, key, `409 {"outcome":"gap"}`},
		{"e2", 2, `{"delta": 4}`, []byte("whsec_c2VjcmV0"), `401 {"error":"unauthorized"}`},
		{"e2", 2, `{"delta": 0}`, key, `400 {"error":"invalid_body"}`},
		{"e2", 2, `{"delta": 3}`, key, `200 {"outcome":"accepted"}`},
	} {
		st, b := post(t, url, c.key, c.id, "tenant 7", c.seq, c.body)
		if got := strconv.Itoa(st) + " " + b; got != c.want {
			t.Errorf("%s seq %d %s: %s, want %s", c.id, c.seq, c.body, got, c.want)
		}
	}
	resp, err := http.Get(url + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`fairrelay_receiver_receives_total{outcome="accepted"} 2`, `fairrelay_receiver_receives_total{outcome="unauthorized"} 1`, "go_goroutines"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, stderr := stop()
	if code != exitOK {
		t.Fatalf("exit status = %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{`"msg":"receiving"`, `"msg":"stopped"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
	r, err := receiverstore.Open(filepath.Join(dir, "receiver.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if tot, err := r.Total(context.Background(), "tenant 7"); err != nil || tot != 7 {
		t.Errorf("Total(tenant 7) = %d, %v; want 7", tot, err)
	}
}
