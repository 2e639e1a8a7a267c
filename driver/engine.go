package driver

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// A container engine's Docker-compatible API (dockerd, podman's `podman
// system service`), asked by the restore role for the user a container
// task runs as: the image's USER and its /etc/passwd and /etc/group. Only
// the few calls that needs, with the standard library.

// Engine endpoint defaults (plugin options docker_endpoint, podman_endpoint).
const (
	defaultDockerEndpoint = "unix:///var/run/docker.sock"
	defaultPodmanEndpoint = "unix:///run/podman/podman.sock"
)

// engineFileLimit bounds a file read out of an image.
const engineFileLimit = 4 << 20

var (
	// errImageMissing: the engine does not have the image.
	errImageMissing = errors.New("image not on this node")
	// errEngineNoFile: the image has no such file.
	errEngineNoFile = errors.New("no such file in the image")
)

// imageRef is what an image reference may hold: a registry, a path, a tag
// and a digest, nothing that could change an API path or query.
var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$`)

// engineClient is a client of one engine's API.
type engineClient struct {
	endpoint string // as configured, for errors
	base     string // URL prefix of the API
	http     *http.Client
}

// checkEngineEndpoint accepts unix:///absolute/path, tcp://host:port and
// http://host:port.
func checkEngineEndpoint(field, endpoint string) error {
	_, err := newEngineClient(endpoint)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func newEngineClient(endpoint string) (*engineClient, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", endpoint, err)
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second}
	c := &engineClient{endpoint: endpoint, http: &http.Client{Transport: tr}}
	switch u.Scheme {
	case "unix":
		if !strings.HasPrefix(u.Path, "/") || u.Host != "" {
			return nil, fmt.Errorf("%q: a unix socket is unix:///absolute/path", endpoint)
		}
		sock := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
		c.base = "http://engine"
	case "tcp", "http":
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("%q: want %s://host:port", endpoint, u.Scheme)
		}
		c.base = "http://" + u.Host
	default:
		return nil, fmt.Errorf("%q must be a unix://, tcp:// or http:// URL (TLS is not supported)", endpoint)
	}
	return c, nil
}

// do sends a request and returns the response of a 2xx status; others are
// errors carrying the engine's message (404: errNotFound wrapped).
func (c *engineClient) do(ctx context.Context, method, p string, q url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("container engine at %s: %w", c.endpoint, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var m struct {
		Message string `json:"message"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &m) != nil || m.Message == "" {
		m.Message = strings.TrimSpace(string(b))
	}
	err = fmt.Errorf("container engine at %s: %s %s: %s: %s", c.endpoint, method, p, resp.Status, m.Message)
	if resp.StatusCode == http.StatusNotFound {
		err = fmt.Errorf("%w: %w", errNotFound, err)
	}
	return nil, err
}

var errNotFound = errors.New("not found")

// imageUser returns the image's configured user (its USER line; "" for
// root). errImageMissing when the engine does not have it.
func (c *engineClient) imageUser(ctx context.Context, image string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, "/images/"+image+"/json", nil, nil)
	if errors.Is(err, errNotFound) {
		return "", fmt.Errorf("%w: %w", errImageMissing, err)
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var info struct {
		Config struct {
			User string `json:"User"`
		} `json:"Config"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&info); err != nil {
		return "", fmt.Errorf("container engine at %s: image %s: %w", c.endpoint, image, err)
	}
	return info.Config.User, nil
}

// pullImage asks the engine to pull image with its own credentials (the
// docker driver would pull it when the main task starts).
func (c *engineClient) pullImage(ctx context.Context, image string) error {
	name, tag := splitImageRef(image)
	resp, err := c.do(ctx, http.MethodPost, "/images/create", url.Values{"fromImage": {name}, "tag": {tag}}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// The status is 200 before the pull starts; failures come in the stream.
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("container engine at %s: pull %s: %w", c.endpoint, image, err)
		}
		if m.Error != "" {
			return fmt.Errorf("container engine at %s: pull %s: %s", c.endpoint, image, m.Error)
		}
	}
}

// splitImageRef splits a reference into the API's fromImage and tag (a
// digest is given as the tag; no tag means latest, as docker pull does).
func splitImageRef(ref string) (string, string) {
	if name, digest, ok := strings.Cut(ref, "@"); ok {
		return name, digest
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

// readImageFiles reads regular files out of image (absolute paths,
// symlinks followed inside the image) through a container created for it
// and never started, then removed. A file the image does not have is left
// out of the map.
func (c *engineClient) readImageFiles(ctx context.Context, image string, paths ...string) (map[string][]byte, error) {
	resp, err := c.do(ctx, http.MethodPost, "/containers/create", nil, map[string]any{
		"Image":           image,
		"Entrypoint":      []string{"/caravan-never-started"},
		"Cmd":             []string{},
		"NetworkDisabled": true,
		"Labels":          map[string]string{"caravan.role": "restore-owner-probe"},
		"HostConfig":      map[string]any{"NetworkMode": "none"},
	})
	if err != nil {
		return nil, fmt.Errorf("create a container of %s to read its /etc/passwd: %w", image, err)
	}
	var created struct {
		ID string `json:"Id"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&created)
	resp.Body.Close()
	if err != nil || created.ID == "" {
		return nil, fmt.Errorf("container engine at %s: create: no container ID (%v)", c.endpoint, err)
	}
	defer c.removeContainer(created.ID)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := c.readFile(ctx, created.ID, p)
		if errors.Is(err, errEngineNoFile) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[p] = b
	}
	return out, nil
}

// removeContainer removes the probe container, also when ctx has ended.
func (c *engineClient) removeContainer(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := c.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"true"}, "v": {"true"}}, nil); err == nil {
		resp.Body.Close()
	}
}

// readFile reads the regular file p of container id, following up to 8
// symlinks, each resolved inside the container's file system.
func (c *engineClient) readFile(ctx context.Context, id, p string) ([]byte, error) {
	for range 8 {
		resp, err := c.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {p}}, nil)
		if errors.Is(err, errNotFound) {
			return nil, fmt.Errorf("%s: %w", p, errEngineNoFile)
		}
		if err != nil {
			return nil, err
		}
		hdr, b, err := firstTarEntry(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("container engine at %s: %s: %w", c.endpoint, p, err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			return b, nil
		case tar.TypeSymlink:
			if path.IsAbs(hdr.Linkname) {
				p = path.Clean(hdr.Linkname)
			} else {
				p = path.Join(path.Dir(p), hdr.Linkname)
			}
		default:
			return nil, fmt.Errorf("%s is not a regular file: %w", p, errEngineNoFile)
		}
	}
	return nil, fmt.Errorf("%s: too many symlinks", p)
}

// firstTarEntry reads the first entry of a tar stream, at most
// engineFileLimit bytes of it.
func firstTarEntry(r io.Reader) (*tar.Header, []byte, error) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("read archive: %w", err)
	}
	if hdr.Typeflag != tar.TypeReg {
		return hdr, nil, nil
	}
	if hdr.Size > engineFileLimit {
		return nil, nil, fmt.Errorf("%d bytes, more than %d", hdr.Size, engineFileLimit)
	}
	b, err := io.ReadAll(io.LimitReader(tr, engineFileLimit))
	if err != nil {
		return nil, nil, fmt.Errorf("read archive: %w", err)
	}
	return hdr, b, nil
}
