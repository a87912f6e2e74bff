package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// confineToCPU restricts every thread of this process to cpu and returns
// the function that restores each thread's previous set. Subscriber
// processes started meanwhile inherit the restriction: a child inherits the
// affinity of the thread that forked it, and every thread has it.
//
// sched_setaffinity acts on one thread, so it is applied to every task in
// /proc/self/task, twice: a thread created during the first pass was
// cloned from a thread that may not have had the new set yet.
func confineToCPU(cpu int) (restore func() error, err error) {
	var one unix.CPUSet
	one.Set(cpu)
	saved := map[int]unix.CPUSet{}
	undo := func() error {
		var first error
		for tid, set := range saved {
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH && first == nil {
				first = fmt.Errorf("restore CPU affinity of thread %d: %w", tid, err)
			}
		}
		// Threads born while confined keep the one CPU; give them the
		// process's original set too.
		if orig, ok := saved[os.Getpid()]; ok {
			if err := forEachThread(func(tid int) error {
				if _, known := saved[tid]; known {
					return nil
				}
				return unix.SchedSetaffinity(tid, &orig)
			}); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	for range 2 {
		err := forEachThread(func(tid int) error {
			if _, done := saved[tid]; !done {
				var old unix.CPUSet
				if err := unix.SchedGetaffinity(tid, &old); err != nil {
					return err
				}
				saved[tid] = old
			}
			return unix.SchedSetaffinity(tid, &one)
		})
		if err != nil {
			undo()
			return nil, fmt.Errorf("--pin-cpu %d: %w", cpu, err)
		}
	}
	return undo, nil
}

// forEachThread calls f with the id of every thread of this process; a
// thread that exited meanwhile (ESRCH) is skipped.
func forEachThread(f func(tid int) error) error {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := f(tid); err != nil && err != unix.ESRCH {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// affinity lists the CPUs this thread may run on, e.g. "0,1".
func affinity() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "unknown"
	}
	var cpus []string
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, strconv.Itoa(i))
		}
	}
	return strings.Join(cpus, ",")
}
