// Package scratchdisk gives a test a filesystem of its own: a small ext4 image on a loop device,
// mounted as root, so that the test can fill it or tune its device without touching the machine's.
package scratchdisk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Disk is a mounted scratch filesystem.
type Disk struct {
	// Dir is where it is mounted.
	Dir string
	// Device is its loop device, such as /dev/loop3.
	Device string
}

// Mount makes an ext4 image of size bytes, attaches it to a loop device and mounts it; it is
// unmounted and detached when the test ends, even if it fails. It fails (never skips) when it
// cannot: the tests run as root, and xcaddy.sh installs the tools.
func Mount(t testing.TB, size int64) Disk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("loop-mounting an ext4 image needs root: run the tests as root (./xcaddy.sh test is run as root)")
	}
	for program, pkg := range map[string]string{"mkfs.ext4": "e2fsprogs", "losetup": "mount", "mount": "mount", "umount": "mount"} {
		if _, err := exec.LookPath(program); err != nil {
			t.Fatalf("%s is not installed: apt-get update && apt-get install -y %s (./xcaddy.sh test installs it): %v", program, pkg, err)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	img := filepath.Join(t.TempDir(), "scratch.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	run("mkfs.ext4", "-q", "-F", "-m", "0", img) // no reserved blocks: root sees what others see
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	mnt := t.TempDir()
	run("mount", dev, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	return Disk{Dir: mnt, Device: dev}
}

// SetReadAhead sets how much the kernel reads ahead on the disk (its read_ahead_kb), for the
// files opened from then on.
func (d Disk) SetReadAhead(t testing.TB, kib int) {
	t.Helper()
	path := filepath.Join("/sys/block", filepath.Base(d.Device), "queue", "read_ahead_kb")
	if err := os.WriteFile(path, []byte(fmt.Sprint(kib)), 0o644); err != nil {
		t.Fatalf("setting the readahead of %s: %v", d.Device, err)
	}
}
