// Starts the vendored Swagger UI on this API's OpenAPI document (no inline script: CSP).
window.ui = window.SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  persistAuthorization: false,
  presets: [window.SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
