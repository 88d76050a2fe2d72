package clock

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestMarkAdmit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mark    Mark
		now     Tick
		want    Mark
		wantErr bool
	}{
		{"zero mark admits zero", 0, 0, 0, false},
		{"later tick raises the mark", 3, 7, 7, false},
		{"equal tick is fine", 7, 7, 7, false},
		{"earlier tick is refused", 7, 6, 7, true},
		{"negative below zero mark is refused", 0, -1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.mark.Admit(tt.now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Mark(%d).Admit(%d) error = %v, wantErr %v", tt.mark, tt.now, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrRegression) {
				t.Fatalf("Mark(%d).Admit(%d) error = %v, want errors.Is ErrRegression", tt.mark, tt.now, err)
			}
			if got != tt.want {
				t.Fatalf("Mark(%d).Admit(%d) = %d, want %d", tt.mark, tt.now, got, tt.want)
			}
		})
	}
}

func TestManualMovesForwardOnly(t *testing.T) {
	t.Parallel()
	m := NewManual(10)
	if got := m.Now(); got != 10 {
		t.Fatalf("Now() = %d, want 10", got)
	}
	if got := m.Advance(5); got != 15 {
		t.Fatalf("Advance(5) = %d, want 15", got)
	}
	if err := m.Set(15); err != nil {
		t.Fatalf("Set(15) at 15: %v, want nil (equal ticks are fine)", err)
	}
	if err := m.Set(20); err != nil {
		t.Fatalf("Set(20): %v", err)
	}
	err := m.Set(19)
	if !errors.Is(err, ErrRegression) {
		t.Fatalf("Set(19) at 20: error = %v, want ErrRegression", err)
	}
	if got := m.Now(); got != 20 {
		t.Fatalf("Now() after refused Set = %d, want 20", got)
	}
}

func TestManualAdvanceNegativePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1) did not panic")
		}
	}()
	NewManual(0).Advance(-1)
}

func TestManualAdvancePastTheLargestTickPanics(t *testing.T) {
	t.Parallel()
	m := NewManual(math.MaxInt64 - 1)
	if got := m.Advance(1); got != math.MaxInt64 {
		t.Fatalf("Advance(1) = %d, want %d", got, Tick(math.MaxInt64))
	}
	defer func() {
		if recover() == nil {
			t.Fatalf("Advance(1) from the largest tick did not panic (now %d)", m.Now())
		}
	}()
	m.Advance(1)
}

func TestWallIsUnixMillis(t *testing.T) {
	before := time.Now().UnixMilli()
	got := int64(Wall{}.Now())
	after := time.Now().UnixMilli()
	if got < before || got > after {
		t.Fatalf("Wall{}.Now() = %d, want within [%d, %d] (Unix ms)", got, before, after)
	}
}

func TestMillisRoundTrip(t *testing.T) {
	in := time.Date(2030, 6, 7, 8, 9, 10, 999_999_999, time.UTC)
	tick := Millis(in)
	if want := Tick(in.UnixMilli()); tick != want {
		t.Fatalf("Millis() = %d, want %d", tick, want)
	}
	if got := tick.Time(); !got.Equal(in.Truncate(time.Millisecond)) {
		t.Fatalf("Tick.Time() = %v, want %v", got, in.Truncate(time.Millisecond))
	}
}

func TestManualIsSource(t *testing.T) {
	var s Source = NewManual(7)
	if s.Now() != 7 {
		t.Fatalf("Now() = %d, want 7", s.Now())
	}
}
