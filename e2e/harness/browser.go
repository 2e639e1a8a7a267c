package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package installs the browser;
// CARAVAN_CHROMIUM overrides it.
const ChromiumPath = "/usr/bin/chromium"

// Browser starts a headless Chromium for the test and returns a chromedp
// context bound to one tab. Chromium runs with every background-networking
// feature off, so it talks to nothing but the local cluster.
func Browser(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path := os.Getenv("CARAVAN_CHROMIUM")
	if path == "" {
		path = ChromiumPath
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("harness: no Chromium at %s (make test installs Debian's chromium package): %v", path, err)
	}
	// Not t.TempDir: Chromium's helpers may still be writing the profile
	// when the test ends, and a failed removal there fails the test.
	profile, err := os.MkdirTemp("", "caravan-chromium-")
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1440, 1800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return ctx
}

// PageText opens url in the tab and polls the rendered page's text until it
// contains every one of wants, then returns it. Nomad's production UI has no
// test attributes, so tests read what a person reads.
func PageText(t testing.TB, ctx context.Context, url string, timeout time.Duration, wants ...string) string {
	t.Helper()
	// The planner's pages refresh themselves (<meta http-equiv="refresh">):
	// a navigation that meets the previous page's refresh is aborted
	// (net::ERR_ABORTED), so opening is retried for a while.
	Eventually(t, 30*time.Second, func() error {
		if err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
			return fmt.Errorf("harness: opening %s: %w", url, err)
		}
		return nil
	})
	var text string
	Eventually(t, timeout, func() error {
		if err := chromedp.Run(ctx, chromedp.Text("body", &text, chromedp.ByQuery)); err != nil {
			return err
		}
		for _, w := range wants {
			// Case-insensitive: Nomad's UIs differ in case ("ready" in
			// 1.6, "Ready" later).
			if !strings.Contains(strings.ToLower(text), strings.ToLower(w)) {
				return fmt.Errorf("%s does not show %q yet; it shows:\n%s", url, w, text)
			}
		}
		return nil
	})
	return text
}

// Screenshot saves a full-page PNG of the current tab under
// build/screenshots/NAME.png for people to look at, and returns its path.
func (c *C) Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("harness: screenshot %s: %v", name, err)
	}
	dir := filepath.Join(c.Root, "build", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Logf("screenshot: %s", path)
	return path
}
