package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

const barWidth = 30

// progress draws a one-line progress bar for a bulk enqueue. It draws only
// when on (the output is a terminal): piped or redirected output gets none.
type progress struct {
	w     io.Writer
	on    bool
	size  int64 // input bytes, -1 when unknown (a pipe)
	drawn bool
}

func newProgress(w io.Writer, on bool, size int64) *progress {
	return &progress{w: w, on: on, size: size}
}

// update redraws the bar after read input bytes and events enqueued.
func (p *progress) update(read int64, events int) {
	if !p.on {
		return
	}
	p.drawn = true
	if p.size <= 0 {
		fmt.Fprintf(p.w, "\r%d events enqueued", events)
		return
	}
	read = min(read, p.size)
	filled := int(read * barWidth / p.size)
	fmt.Fprintf(p.w, "\r[%s%s] %3d%%  %d events enqueued",
		strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), read*100/p.size, events)
}

// done ends the bar's line, once.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// fileIsTerminal reports whether f is a terminal (a character device that
// answers terminal requests: /dev/null does not count).
func fileIsTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
