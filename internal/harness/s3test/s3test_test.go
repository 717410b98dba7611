package s3test_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierlog/tierlog/internal/harness/s3test"
)

// TestStartStop starts a private server (no Main here), checks its TLS
// health endpoint, and that Stop ends the process.
func TestStartStop(t *testing.T) {
	srv := s3test.Start(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: srv.TLSConfig()}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Plain HTTP is refused: the server speaks TLS only.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + srv.Endpoint + "/health"); err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode)
	}

	srv.Stop()
	srv.Stop() // idempotent
	_, err = client.Get(srv.URL + "/health")
	require.Error(t, err, "server still answering after Stop")
}

func TestNewBucketNameUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := s3test.NewBucketName(t)
		require.False(t, seen[n])
		require.Regexp(t, `^[a-z0-9][a-z0-9-]{2,62}$`, n)
		seen[n] = true
	}
}
