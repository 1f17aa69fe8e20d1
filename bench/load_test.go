package main

import (
	"testing"
	"time"
)

func TestAnAnswerReturnsTheSilenceItEnded(t *testing.T) {
	start := time.Unix(1000, 0)
	var c loadCounters
	c.lastAnswer.Store(start.UnixNano())

	if got := c.answered(start.Add(700 * time.Millisecond)); got != 700*time.Millisecond {
		t.Fatalf("the first answer ended a silence of %v, want 700ms", got)
	}
	if got := c.answered(start.Add(600 * time.Millisecond)); got != 0 {
		t.Fatalf("an answer completed before the last one ended a silence of %v, want none", got)
	}
	if got := c.answered(start.Add(900 * time.Millisecond)); got != 200*time.Millisecond {
		t.Fatalf("the next answer ended a silence of %v, want 200ms", got)
	}
	if got := time.Duration(c.silence.Load()); got != 700*time.Millisecond {
		t.Fatalf("longest silence %v, want 700ms", got)
	}
}
