// Swagger UI for /api/docs/. A file, not an inline script: the page's CSP is default-src 'self'.
// The page passes the schema URL and the CSRF token in data attributes, so nothing here is
// rendered per request.
"use strict";

(function () {
  const root = document.getElementById("swagger-ui");
  const unsafe = new Set(["POST", "PUT", "PATCH", "DELETE"]);

  window.ui = SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // "Try it out" runs as the signed-in owner: session writes need the CSRF token, and only
    // this site's own URLs ever get it.
    requestInterceptor: (request) => {
      const target = new URL(request.url, window.location.href);
      if (unsafe.has(String(request.method).toUpperCase()) && target.origin === window.location.origin) {
        request.headers[root.dataset.csrfHeader] = root.dataset.csrfToken;
      }
      return request;
    },
  });
})();
