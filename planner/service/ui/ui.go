// Package ui is the planner's own web page at /ui: the GPUs and who holds
// each share with its metered use (Cluster), the managed jobs (Jobs), one
// job's fitted loss curve, speed model, options and decision timeline
// (Job), and the current round's candidates with the verdict on each
// (Plan). Pages are server-rendered with html/template; charts are inline
// SVG drawn by internal/svgplot; each page refreshes itself. It reads only
// the planner's own state, plus a cached view of Nomad's nodes, allocations
// and allocation stats for the Cluster page.
package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/caravan-nomad/caravan/planner/service/ingest"
	"github.com/caravan-nomad/caravan/planner/service/manager"
)

//go:embed templates/*.html
var templateFS embed.FS

// Planner is the planner state the pages read.
type Planner interface {
	Last() *manager.Round
	History(namespace, id string) []manager.Decision
}

// Progress is the progress store as the pages read it.
type Progress interface {
	Records(k ingest.JobKey) []ingest.Record
}

// Server renders the pages.
type Server struct {
	Planner  Planner
	Progress Progress
	Cluster  *Gatherer
	// Token, when set, is required (bearer, cookie, or ?token= once).
	Token string
	// Refresh is how often a page reloads itself (default 10 s).
	Refresh time.Duration
	Leader  func() bool
	ID      string
	Logger  hclog.Logger

	pages map[string]*template.Template
}

// CookieName holds the login (a hash of the token, never the token).
const CookieName = "caravan_planner_ui"

// Prefix is where the pages live.
const Prefix = "/ui"

// New parses the templates.
func New(s *Server) (*Server, error) {
	if s.Refresh <= 0 {
		s.Refresh = 10 * time.Second
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	s.pages = map[string]*template.Template{}
	for _, p := range []string{"cluster", "jobs", "job", "plan", "queues", "login"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/part-*.html", "templates/"+p+".html")
		if err != nil {
			return nil, err
		}
		s.pages[p] = t
	}
	return s, nil
}

// Handler serves /ui and everything under it.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/jobs", http.StatusSeeOther)
	})
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Prefix+"/" {
			http.Redirect(w, r, Prefix+"/jobs", http.StatusSeeOther)
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc(Prefix+"/cluster", s.cluster)
	mux.HandleFunc(Prefix+"/jobs", s.jobs)
	mux.HandleFunc(Prefix+"/jobs/", s.job)
	mux.HandleFunc(Prefix+"/plan", s.plan)
	mux.HandleFunc(Prefix+"/queues", s.queues)
	return s.auth(getOnly(mux))
}

func getOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// cookieValue is what the login cookie holds: a hash of the token.
func cookieValue(token string) string {
	h := sha256.Sum256([]byte("caravan planner ui\x00" + token))
	return hex.EncodeToString(h[:])
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// auth lets every read through when no token is set; otherwise it takes a
// bearer token, the login cookie, or ?token= (which sets the cookie and
// redirects to the same page without the token in its address).
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'")
		w.Header().Set("Referrer-Policy", "no-referrer")
		if s.Token == "" {
			h.ServeHTTP(w, r)
			return
		}
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if equal(bearer, s.Token) {
				h.ServeHTTP(w, r)
				return
			}
			s.denied(w, r, "wrong token")
			return
		}
		if q := r.URL.Query(); q.Has("token") {
			if !equal(q.Get("token"), s.Token) {
				s.denied(w, r, "wrong token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: cookieValue(s.Token), Path: Prefix,
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(CookieName); err == nil && equal(c.Value, cookieValue(s.Token)) {
			h.ServeHTTP(w, r)
			return
		}
		s.denied(w, r, "this page needs the planner's ui token")
	})
}

func (s *Server) denied(w http.ResponseWriter, r *http.Request, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="caravan planner ui"`)
	s.render(w, r, http.StatusUnauthorized, "login", page{Title: "login", Message: why})
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Refresh int
	Now     time.Time
	Leader  bool
	ID      string
	Message string
	Data    any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	p.Now = time.Now()
	if p.Refresh == 0 && name != "login" {
		p.Refresh = int(s.Refresh.Seconds())
	}
	if s.Leader != nil {
		p.Leader = s.Leader()
	}
	p.ID = s.ID
	var b strings.Builder
	if err := s.pages[name].Execute(&b, p); err != nil {
		s.Logger.Error("rendering a page failed", "page", name, "error", err)
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(b.String()))
	}
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	var v ClusterView
	if s.Cluster != nil {
		v = s.Cluster.Cluster(r.Context())
	} else {
		v.Err = "the cluster view is not configured"
	}
	s.render(w, r, http.StatusOK, "cluster", page{Title: "cluster", Nav: "cluster", Data: newClusterData(v, s.Planner.Last())})
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "jobs", page{Title: "jobs", Nav: "jobs", Data: s.jobsData(s.Planner.Last())})
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "plan", page{Title: "plan", Nav: "plan", Data: newPlanData(s.Planner.Last())})
}

// job is /ui/jobs/<namespace>/<id> (each segment path-escaped).
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), Prefix+"/jobs/")
	nsE, idE, ok := strings.Cut(rest, "/")
	ns, err1 := url.PathUnescape(nsE)
	id, err2 := url.PathUnescape(idE)
	if !ok || ns == "" || id == "" || err1 != nil || err2 != nil {
		s.render(w, r, http.StatusNotFound, "jobs", page{Title: "jobs", Nav: "jobs", Message: "want /ui/jobs/<namespace>/<job id>", Data: s.jobsData(s.Planner.Last())})
		return
	}
	last := s.Planner.Last()
	if last != nil {
		for _, j := range last.Jobs {
			if j.Namespace == ns && j.ID == id {
				d := s.jobData(r.Context(), last, j)
				s.render(w, r, http.StatusOK, "job", page{Title: id, Nav: "jobs", Data: d})
				return
			}
		}
	}
	s.render(w, r, http.StatusNotFound, "jobs", page{Title: "jobs", Nav: "jobs",
		Message: "job " + ns + "/" + id + " is not managed by the planner (no caravan_planner meta, or not seen yet)",
		Data:    s.jobsData(last)})
}

// JobPath is the page of one job.
func JobPath(namespace, id string) string {
	return Prefix + "/jobs/" + url.PathEscape(namespace) + "/" + url.PathEscape(id)
}
