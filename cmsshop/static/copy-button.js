/* Copy buttons: the webhook URL (admin payment settings) and license keys (the
 * customer's licenses page).
 *
 * Without JavaScript the button stays hidden and the text is selectable as it is (a
 * readonly input, or a <code> element). With it, the button is shown and copies the
 * text to the clipboard, saying so beside it (or selecting the text when the clipboard
 * API is not available, so the user can copy it themselves).
 */
(function () {
  "use strict";

  function textOf(source) {
    return source.value !== undefined ? source.value : source.textContent;
  }

  function selectAll(source) {
    if (source.select) {
      source.select();
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function bind(button) {
    var source = document.getElementById(button.getAttribute("data-copy-target"));
    if (!source) {
      return;
    }
    var status = button.parentNode.querySelector("[data-copy-status]");
    var say = function (text) {
      if (status) {
        status.textContent = text;
      }
    };
    button.hidden = false;
    button.addEventListener("click", function () {
      selectAll(source);
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(textOf(source).trim()).then(
          function () {
            say("Copied.");
          },
          function () {
            say("Selected: press Ctrl+C (or Cmd+C) to copy.");
          }
        );
      } else {
        try {
          say(document.execCommand("copy") ? "Copied." : "Selected: press Ctrl+C (or Cmd+C) to copy.");
        } catch (e) {
          say("Selected: press Ctrl+C (or Cmd+C) to copy.");
        }
      }
    });
  }

  var buttons = document.querySelectorAll("button[data-copy-target]");
  for (var i = 0; i < buttons.length; i++) {
    bind(buttons[i]);
  }
})();
