// The directory page's filters: an empty field is left out of the query, as the API asks
// (an empty value is refused by name); kept in a file because the site's CSP allows no inline script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("directory-filters");
  if (!form) {
    return;
  }
  form.addEventListener("submit", () => {
    for (const input of form.querySelectorAll("input[name]")) {
      if (input.value.trim() === "") {
        input.disabled = true;
      }
    }
  });
});
