package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// RequestError is a request to the API server that failed, with what it
// asked for: the verb and resource `kubectl auth can-i` takes, the
// object, the API. Its text is the error's own: it adds data, not words.
type RequestError struct {
	Verb      string // "list", "get"
	Resource  string // as kubectl names it: "nodes", "resourceslices.resource.k8s.io"
	API       string // the group/version: "v1", "resource.k8s.io/v1"
	Namespace string // "" for a cluster-scoped resource, or every namespace with AllNamespaces
	// AllNamespaces: a namespaced resource listed in every namespace.
	AllNamespaces bool
	Name          string // the object a get asked for
	Err           error
}

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// CanI is the request as `kubectl auth can-i` takes it.
func (e *RequestError) CanI() string {
	s := e.Verb + " " + e.Resource
	if e.Name != "" {
		s += "/" + e.Name
	}
	switch {
	case e.Namespace != "":
		s += " -n " + e.Namespace
	case e.AllNamespaces:
		s += " --all-namespaces"
	}
	return s
}

// Listing wraps the error of a LIST of resource (nil stays nil).
func Listing(resource, api, namespace string, allNamespaces bool, err error) error {
	if err == nil {
		return nil
	}
	return &RequestError{Verb: "list", Resource: resource, API: api, Namespace: namespace, AllNamespaces: allNamespaces, Err: err}
}

// APIWhy is the why of a request to the API server that failed, by the
// error's class: the server not reached (refused, no route, no such
// name, TLS), the credentials refused (401), the request forbidden
// (403: RBAC), no answer in time, the API or the object not there. A
// RequestError in err names the verb and resource the fix grants or
// checks. The fixes differ: a connectivity failure is not cured by RBAC.
func APIWhy(reason string, err error) report.Why {
	var re *RequestError
	if !errors.As(err, &re) {
		re = nil
	}
	var x509Unknown x509.UnknownAuthorityError
	var x509Host x509.HostnameError
	var x509Invalid x509.CertificateInvalidError
	var dns *net.DNSError
	switch {
	case apierrors.IsUnauthorized(err):
		return report.API(report.APIUnauthorized, reason, "")
	case apierrors.IsForbidden(err):
		need := ""
		if re != nil {
			need = re.CanI()
		}
		return report.API(report.APIForbidden, reason, need)
	case apierrors.IsNotFound(err) && re != nil && re.Name == "":
		// A LIST answered 404: the API server does not serve the type.
		return report.API(report.APINotServed, reason, re.API+" "+re.Resource)
	case apierrors.IsNotFound(err):
		need := "the object"
		if re != nil {
			need = re.Resource + " " + re.Name
			if re.Namespace != "" {
				need += " -n " + re.Namespace
			}
		}
		return report.API(report.APINotFound, reason, need)
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		// A continue token that expired while a large list was paged.
		return report.Again(reason).With("The list changed faster than it was paged (its continue token expired).")
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return report.API(report.APITimeout, reason, "")
	case errors.As(err, &x509Unknown), errors.As(err, &x509Host), errors.As(err, &x509Invalid):
		return report.API(report.APIUnreachable, reason, "").With("The TLS handshake failed: the kubeconfig's certificate-authority (or certificate-authority-data) must be the cluster's CA, and its server a name the server's certificate holds.")
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.As(err, &dns):
		return report.API(report.APIUnreachable, reason, "")
	}
	try := "the same request"
	if re != nil {
		try = "`kubectl " + re.Verb + " " + re.Resource
		if re.Name != "" {
			try += " " + re.Name
		}
		switch {
		case re.Namespace != "":
			try += " -n " + re.Namespace
		case re.AllNamespaces:
			try += " -A"
		}
		try += "`"
	}
	return report.Explain(reason, fmt.Sprintf("Make %s with the same kubeconfig and context: the API server's answer says what is wrong.", try))
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
