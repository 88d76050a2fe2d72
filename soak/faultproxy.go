package soak

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// FaultProxy is a TCP proxy between clients and one server that injects
// network faults on demand: it passes bytes through, delays them, black-
// holes connections (accepts and never answers: what a partition looks
// like to a client whose kernel still holds the socket open) or cuts them
// (a reset). The soak puts one in front of the PostgreSQL server and one
// in front of the receiver's HTTP port; every relay, producer and the
// receiver connect through them.
//
// A blackholed connection stays dead after the blackhole ends, as one lost
// in a partition does: its client must notice (a timeout) and reconnect.
// When a client closes, the proxy closes the server side, so the server
// ends the session (and rolls back its transaction) at once.
//
// On a PostgreSQL connection the proxy can also cut at the client's COMMIT
// (CutAtCommit), or at a call of a function that commits on its own
// (selfCommitting): the outcome of that commit is then unknown to the
// client.
type FaultProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	delay     time.Duration
	blackhole bool
	commitCut int // >0: cut the next commitCut COMMITs
	cutAfter  bool
	conns     map[*proxyConn]struct{}
	accepted  int
	closed    bool
	wg        sync.WaitGroup
}

// proxyConn is one proxied connection: the client's socket and the
// server's (nil while blackholed from the start).
type proxyConn struct {
	client net.Conn
	dead   bool // blackholed: nothing more is forwarded either way (FaultProxy.mu)

	mu     sync.Mutex
	server net.Conn
	cutted bool
}

// NewFaultProxy listens on a free loopback port and forwards each
// connection to target (host:port), passing bytes through until told
// otherwise.
func NewFaultProxy(target string) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak: fault proxy: %w", err)
	}
	p := &FaultProxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:port).
func (p *FaultProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every chunk of bytes in either direction by d from now
// on (0: no delay).
func (p *FaultProxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Blackhole, with on, makes every open connection dead (nothing more is
// forwarded either way, the sockets stay open) and new connections are
// accepted but never connected to the server. Blackhole(false) lets new
// connections through again; the dead ones stay dead.
func (p *FaultProxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
	if on {
		for c := range p.conns {
			c.dead = true
		}
	}
}

// Cut resets every open connection (the client sees a reset or EOF, the
// server an EOF) and returns how many there were.
func (p *FaultProxy) Cut() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.cut()
	}
	return len(conns)
}

// CutAtCommit arms the proxy to cut the connection of the next n
// PostgreSQL COMMITs it sees from a client (a simple-protocol Query
// "commit", which is how pgx's Tx.Commit commits, a COMMIT in a batch,
// as the PostgreSQL stores send theirs with a write's last statements, or
// a call of one of selfCommitting's functions, in one autocommitted
// statement: pgStream). With after false the COMMIT is not
// forwarded (the server rolls the transaction back when the connection
// drops); with after true it is forwarded and the connection cut before
// the reply (the transaction is committed). Either way the client gets an
// error and cannot know which happened.
func (p *FaultProxy) CutAtCommit(n int, after bool) {
	p.mu.Lock()
	p.commitCut, p.cutAfter = n, after
	p.mu.Unlock()
}

// Accepted is the number of connections accepted so far.
func (p *FaultProxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops listening and cuts every connection.
func (p *FaultProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.accepted++
		c := &proxyConn{client: client, dead: p.blackhole}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(c)
	}
}

// serve connects c to the server (unless it is dead from the start) and
// pumps bytes both ways until either side closes.
func (p *FaultProxy) serve(c *proxyConn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.cut()
	}()
	p.mu.Lock()
	dead := c.dead
	p.mu.Unlock()
	if dead {
		// Accepted, never answered: read and drop until the client gives up.
		_, _ = io.Copy(io.Discard, c.client)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the client sees its connection closed: the server is down
	}
	c.mu.Lock()
	if c.cutted { // cut while dialling
		c.mu.Unlock()
		server.Close()
		return
	}
	c.server = server
	c.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pump(c, c.client, server, true); done <- struct{}{} }()
	go func() { p.pump(c, server, c.client, false); done <- struct{}{} }()
	<-done // either side closed: close both
	c.cut()
	<-done
}

// pump copies from src to dst, applying the faults in force at each chunk.
// fromClient turns on the COMMIT watch.
func (p *FaultProxy) pump(c *proxyConn, src, dst net.Conn, fromClient bool) {
	var pg pgStream
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			dead, delay := c.dead, p.delay
			armed := fromClient && p.commitCut > 0
			p.mu.Unlock()
			if !dead && delay > 0 {
				time.Sleep(delay)
			}
			if !dead && armed {
				if at, ok := pg.commitAt(chunk); ok {
					p.mu.Lock()
					fire := p.commitCut > 0
					after := p.cutAfter
					if fire {
						p.commitCut--
					}
					p.mu.Unlock()
					if fire {
						if after {
							// The whole COMMIT reaches the server; its
							// reply is dropped (dead), then the cut.
							p.mu.Lock()
							c.dead = true
							p.mu.Unlock()
							_, _ = dst.Write(chunk)
							time.Sleep(50 * time.Millisecond)
						} else {
							_, _ = dst.Write(chunk[:at]) // up to the COMMIT, not it
						}
						c.cut()
						return
					}
				}
			} else if fromClient {
				pg.skip(chunk)
			}
			p.mu.Lock()
			dead = c.dead
			p.mu.Unlock()
			if !dead {
				if _, werr := dst.Write(chunk); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes both sockets, the client's with a reset.
func (c *proxyConn) cut() {
	c.mu.Lock()
	server := c.server
	c.cutted = true
	c.mu.Unlock()
	if tc, ok := c.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.client.Close()
	if server != nil {
		server.Close()
	}
}

// pgStream follows the message boundaries of a PostgreSQL client's
// stream: the first message (startup, or an SSL/GSS request and then the
// startup) has no type byte, every later one is a type byte and a length.
// It finds a COMMIT in either protocol: a simple Query "commit", or the
// Bind and Execute of a statement whose Parse was COMMIT (a COMMIT in a
// batch, the extended protocol; pgx prepares it once per connection and
// binds it by name afterwards, so the names are kept). A statement that
// calls one of selfCommitting's functions counts as a COMMIT (isCommit).
type pgStream struct {
	started bool            // the startup message is behind
	pending []byte          // bytes of a message header or of a message being gathered whole
	left    int             // bytes of the current message still to skip
	gather  bool            // pending holds a message being gathered whole
	want    int             // total length of that message, its type byte included
	commits map[string]bool // prepared statements whose query is COMMIT
	bound   bool            // a COMMIT was bound; its Execute is still to come
	bindAt  int             // where that Bind began in the current chunk (0: in an earlier one)
}

const (
	sslRequestCode = 80877103
	gssRequestCode = 80877104
)

// gathered says which messages commitAt reads whole: a type and a length
// that may be a COMMIT's Query or Execute, and every Parse and Bind (a
// Bind of a selfCommitting call carries the arrays of a whole batch), to
// keep the names of the statements prepared as a COMMIT right.
func gathered(typ byte, n int) bool {
	switch typ {
	case 'Q', 'E':
		return n < 64
	case 'B', 'P':
		return true
	}
	return false
}

// selfCommitting are the calls of the PostgreSQL stores' functions that
// commit by themselves: each store sends its call alone, outside any
// transaction, so that it commits when the statement ends
// (docs/decisions/postgres-server-side-transitions.md). pgqueuestore's
// settle_claim is a claim and an ack, pgreceiverstore's receive_accepted a
// receive. A new such function belongs here, or the commit cut misses it.
var selfCommitting = [][]byte{[]byte(".settle_claim("), []byte(".receive_accepted(")}

// isCommit says whether query commits: COMMIT, or a call of one of
// selfCommitting's functions.
func isCommit(query []byte) bool {
	q := bytes.TrimSpace(bytes.TrimRight(query, "\x00"))
	return bytes.EqualFold(q, []byte("commit")) ||
		slices.ContainsFunc(selfCommitting, func(call []byte) bool { return bytes.Contains(q, call) })
}

// cstring splits b after its first NUL-terminated string.
func cstring(b []byte) (string, []byte) {
	k := bytes.IndexByte(b, 0)
	if k < 0 {
		return string(b), nil
	}
	return string(b[:k]), b[k+1:]
}

// commitAt feeds chunk to the stream and reports the offset in chunk
// where a COMMIT starts, if one is complete in this chunk: a Query
// "commit", or a COMMIT's Bind whose Execute ends in this chunk (a
// COMMIT split across chunks is found too; its offset is then 0).
func (s *pgStream) commitAt(chunk []byte) (int, bool) {
	at, found := -1, false
	start := 0 // offset in chunk where the message being gathered began
	for i := 0; i < len(chunk); {
		if s.left > 0 {
			k := min(s.left, len(chunk)-i)
			s.left -= k
			i += k
			continue
		}
		if len(s.pending) == 0 && !s.gather {
			start = i
		}
		s.pending = append(s.pending, chunk[i])
		i++
		if !s.started {
			if len(s.pending) < 8 {
				continue
			}
			n := int(binary.BigEndian.Uint32(s.pending[:4]))
			code := binary.BigEndian.Uint32(s.pending[4:8])
			if code != sslRequestCode && code != gssRequestCode {
				s.started = true
			}
			s.left = max(n-8, 0)
			s.pending = s.pending[:0]
			continue
		}
		if !s.gather {
			if len(s.pending) < 5 {
				continue
			}
			typ := s.pending[0]
			n := int(binary.BigEndian.Uint32(s.pending[1:5]))
			if !gathered(typ, n) {
				s.left = max(n-4, 0)
				s.pending = s.pending[:0]
				continue
			}
			s.gather, s.want = true, n+1
		}
		if len(s.pending) < s.want {
			continue
		}
		body := s.pending[5:]
		switch s.pending[0] {
		case 'Q':
			if isCommit(body) && !found {
				at, found = start, true
			}
		case 'P':
			name, rest := cstring(body)
			query, _ := cstring(rest)
			if s.commits == nil {
				s.commits = make(map[string]bool)
			}
			if isCommit([]byte(query)) {
				s.commits[name] = true
			} else {
				delete(s.commits, name)
			}
		case 'B':
			_, rest := cstring(body) // the portal
			stmt, _ := cstring(rest)
			if s.commits[stmt] {
				s.bound, s.bindAt = true, start
			}
		case 'E':
			if s.bound && !found {
				at, found = s.bindAt, true
			}
			s.bound = false
		}
		s.gather = false
		s.pending = s.pending[:0]
	}
	if s.bound {
		s.bindAt = 0 // its Execute comes in a later chunk
	}
	return at, found
}

// skip feeds chunk to the stream without looking for a COMMIT.
func (s *pgStream) skip(chunk []byte) { s.commitAt(chunk) }
