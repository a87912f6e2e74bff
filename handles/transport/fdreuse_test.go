package transport

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A shutdown begun by a cancelled context is over when stop returns: the
// fd may then be closed and its number reused by a socket that nothing
// shuts down. Without the wait, about one in a hundred sockets opened
// after Subscriber.Run returned was hung up by Run's late shutdown (found
// in review). Each round closes the watched fd and at once opens a
// socket pair, which takes its number; after a pause for any late
// shutdown, none of them may be hung up.
func TestShutdownOnDoneIsOverWhenStopReturns(t *testing.T) {
	const rounds, batch = 20, 100
	for range rounds {
		var reused [][2]int
		for range batch {
			watched, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			stop := shutdownOnDone(ctx, watched[0])
			cancel()
			stop()
			unix.Close(watched[0])
			unix.Close(watched[1])
			fresh, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			reused = append(reused, fresh)
		}
		time.Sleep(5 * time.Millisecond)
		hung := 0
		for _, p := range reused {
			if hungUp(p[0]) || hungUp(p[1]) {
				hung++
			}
			unix.Close(p[0])
			unix.Close(p[1])
		}
		if hung > 0 {
			t.Fatalf("%d of %d sockets opened after stop returned were shut down by it", hung, batch)
		}
	}
}
