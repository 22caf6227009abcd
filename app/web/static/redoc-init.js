// Starts the vendored ReDoc on this API's OpenAPI document (no inline script: CSP).
window.Redoc.init("/openapi.json", { hideDownloadButton: false }, document.getElementById("redoc"));
