package dist

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image is built without docker, written as a tarball (docker load
// reads it), and read back: its one layer holds rootfs/ and berth, and
// the berth in it, unpacked, says the version it was stamped with. The
// binary is built for this machine (the static release build is make
// dist's), which the test runs.
func TestImageRunsBerthFromItsLayer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds berth")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-imagetest", "-o", bin, "../../cmd/berth")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	img, err := Image(binary, runtime.GOARCH, created)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag("berth:v0.0.0-imagetest")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(path, ref, img); err != nil {
		t.Fatal(err)
	}

	back, err := tarball.ImageFromPath(path, &ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if c := cf.Config; !slices.Equal(c.Entrypoint, []string{BinaryPath}) || c.User != User || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config: entrypoint %v, user %q, %s/%s", c.Entrypoint, c.User, cf.OS, cf.Architecture)
	}
	if _, ok := cf.Config.ExposedPorts["4680/tcp"]; !ok {
		t.Errorf("ports %v: want 4680/tcp", cf.Config.ExposedPorts)
	}
	files := map[string]int64{}
	unpacked := filepath.Join(dir, "unpacked")
	rc := mutate.Extract(back)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
		if h.Name == BinaryPath[1:] {
			f, err := os.OpenFile(unpacked, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	for name, mode := range map[string]int64{"etc/passwd": 0o644, "etc/group": 0o644, "tmp": 0o1777, "usr/local/bin/berth": 0o755} {
		if got, ok := files[name]; !ok || got != mode {
			t.Errorf("%s: mode %o (in the layer: %t), want %o; layer has %v", name, got, ok, mode, files)
		}
	}
	out, err := exec.Command(unpacked, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("berth version from the layer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "v0.0.0-imagetest") {
		t.Errorf("berth version from the layer says %q; want the stamped v0.0.0-imagetest", out)
	}
	passwd, _ := rootfs.ReadFile("rootfs/etc/passwd")
	if !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("rootfs/etc/passwd has no nonroot user 65532:\n%s", passwd)
	}
}
