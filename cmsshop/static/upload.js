/* Release uploads with a progress bar (admin product page).
 *
 * Sends the upload form with XMLHttpRequest and the CSRF token in the X-CSRF-Token
 * header: the server then never has to parse (buffer) the multipart body to find the
 * token, and streams the file straight to storage. Without JavaScript the form submits
 * as usual. On success the server answers 303 to the product page, which is loaded;
 * on an error the form of the answer (with its messages) replaces this one.
 */
(function () {
  "use strict";

  function bind(form) {
    form.addEventListener("submit", function (event) {
      if (!window.FormData || !window.XMLHttpRequest || !window.DOMParser) {
        return; // the plain form submit
      }
      event.preventDefault();
      var token = form.querySelector("input[name=csrf_token]");
      var box = form.querySelector(".upload-progress");
      var bar = form.querySelector("progress");
      var status = form.querySelector("[data-upload-status]");
      var button = form.querySelector("button[type=submit]");
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("X-CSRF-Token", token ? token.value : "");
      // Kept on the redirect the request follows: that page leaves the one-time notice
      // for the page loaded below (cmsshop.web.current_notice).
      xhr.setRequestHeader("X-Keep-Notice", "1");
      xhr.upload.addEventListener("progress", function (progress) {
        if (progress.lengthComputable) {
          bar.max = progress.total;
          bar.value = progress.loaded;
          status.textContent =
            "Uploading: " + Math.floor((progress.loaded * 100) / progress.total) + "%";
        }
      });
      xhr.addEventListener("load", function () {
        if (xhr.status >= 200 && xhr.status < 300) {
          status.textContent = "Uploaded.";
          window.location.assign(xhr.responseURL || window.location.href);
          return;
        }
        var answer = new DOMParser().parseFromString(xhr.responseText, "text/html");
        var fresh = answer.getElementById(form.id);
        if (fresh) {
          fresh = document.importNode(fresh, true);
          form.parentNode.replaceChild(fresh, form);
          bind(fresh);
          var invalid = fresh.querySelector("[aria-invalid=true]") || fresh.querySelector("input");
          if (invalid) {
            invalid.focus();
          }
          return;
        }
        var heading = answer.querySelector("h1");
        failed("The upload failed: " + (heading ? heading.textContent : "error " + xhr.status));
      });
      xhr.addEventListener("error", function () {
        failed("The upload failed: the connection was lost. Please try again.");
      });

      function failed(message) {
        box.hidden = true;
        button.disabled = false;
        status.textContent = message;
      }

      button.disabled = true;
      box.hidden = false;
      bar.value = 0;
      status.textContent = "Uploading…";
      xhr.send(new FormData(form));
    });
  }

  var forms = document.querySelectorAll("form[data-upload]");
  for (var i = 0; i < forms.length; i += 1) {
    bind(forms[i]);
  }
})();
