package childproc

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

func TestTailKeepsTheLastLinesAndThePanic(t *testing.T) {
	w := NewTailWriter(1 << 10)
	fmt.Fprint(w, "starting\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:\n")
	for i := range 20 {
		fmt.Fprintf(w, "frame %d\n", i)
	}
	got := w.Tail(3)
	want := "    panic: runtime error: index out of range\n    …\n    frame 17\n    frame 18\n    frame 19"
	if got != want {
		t.Errorf("Tail(3) =\n%s\nwant\n%s", got, want)
	}
	small := NewTailWriter(8)
	fmt.Fprint(small, "0123456789abcdef")
	if got := small.Tail(5); got != "    89abcdef" {
		t.Errorf("8-byte tail %q", got)
	}
}

func TestExitReport(t *testing.T) {
	w := NewTailWriter(64)
	fmt.Fprint(w, "agent: --rate 0: want a positive rate\n")
	err := exec.Command("sh", "-c", "exit 3").Run()
	if got := ExitReport("agent", err, w); !strings.HasPrefix(got, "agent exited (exit status 3); its stderr ended:\n    agent: --rate 0") {
		t.Errorf("report %q", got)
	}
	if got := ExitReport("camera", nil, NewTailWriter(8)); got != "camera exited (exit status 0)" {
		t.Errorf("clean exit: %q", got)
	}
	if got := ExitReport("x", errors.New("wait: no child"), NewTailWriter(8)); got != "x exited (wait: no child)" {
		t.Errorf("other error: %q", got)
	}
}
