/* Copy buttons (admin payment settings: the webhook URL).
 *
 * Without JavaScript the button stays hidden and the URL is in a readonly input the
 * user can select and copy. With it, the button is shown and copies the input's value
 * to the clipboard (selecting the text when the clipboard API is not available).
 */
(function () {
  "use strict";

  function bind(button) {
    var source = document.getElementById(button.getAttribute("data-copy-target"));
    if (!source) {
      return;
    }
    var status = button.parentNode.querySelector("[data-copy-status]");
    button.hidden = false;
    button.addEventListener("click", function () {
      source.select();
      var done = function () {
        if (status) {
          status.textContent = "Copied.";
        }
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(source.value).then(done, function () {
          if (status) {
            status.textContent = "Selected: press Ctrl+C (or Cmd+C) to copy.";
          }
        });
      } else {
        done();
        try {
          document.execCommand("copy");
        } catch (e) {
          /* the text stays selected */
        }
      }
    });
  }

  var buttons = document.querySelectorAll("button[data-copy-target]");
  for (var i = 0; i < buttons.length; i++) {
    bind(buttons[i]);
  }
})();
