// The article editor's live preview: while the Markdown is typed, ask the server for the
// same sanitised HTML the Preview button shows (POST /admin/articles/preview). Without
// this script the Preview button still works; the HTML comes from the server's
// sanitiser, never from the browser.
(function () {
  "use strict";
  var textarea = document.querySelector("textarea.markdown-editor[data-preview-url]");
  var section = document.getElementById("article-preview");
  var target = document.getElementById("article-preview-body");
  if (!textarea || !section || !target || !window.fetch || !window.FormData) {
    return;
  }
  var form = textarea.form;
  var timer = null;
  var sent = 0;

  function refresh() {
    var number = ++sent;
    var data = new FormData();
    data.append("csrf_token", form.elements.csrf_token.value);
    data.append("body", textarea.value);
    fetch(textarea.getAttribute("data-preview-url"), {
      method: "POST",
      body: new URLSearchParams(data),
      credentials: "same-origin",
      headers: { "Accept": "text/html" }
    }).then(function (response) {
      if (!response.ok) {
        throw new Error("preview failed");
      }
      return response.text();
    }).then(function (html) {
      if (number === sent) {  // an older answer never replaces a newer one
        target.innerHTML = html;
        section.hidden = false;
      }
    }).catch(function () {
      // The Preview button still works; nothing to do here.
    });
  }

  textarea.addEventListener("input", function () {
    window.clearTimeout(timer);
    timer = window.setTimeout(refresh, 500);
  });
})();
